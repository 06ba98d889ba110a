package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuProfile is the part of a pprof CPU profile the breakdown needs: per sample, its CPU time and the
// functions on its stack, leaf first (inlined frames included).
type cpuProfile struct {
	durationNanos int64
	samples       []sample
}

type sample struct {
	nanos int64
	stack []string
}

// readProfile decodes a gzipped profile.proto (github.com/google/pprof/proto/profile.proto) with protowire.
func readProfile(path string) (*cpuProfile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if zr, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	type rawSample struct {
		locs   []uint64
		values []int64
	}
	var (
		strs      []string
		samples   []rawSample
		locations = map[uint64][]uint64{} // id -> function ids, innermost (inlined) first
		functions = map[uint64]int64{}    // id -> name's string index
		types     []int64                 // sample types' type string indices
		p         cpuProfile
	)
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case 1: // sample_type
			return eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
				if num == 1 {
					types = append(types, int64(n))
				}
				return nil
			})
		case 2: // sample
			var s rawSample
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				vals, err := repeatedVarint(typ, v, n)
				if err != nil {
					return err
				}
				for _, x := range vals {
					switch num {
					case 1:
						s.locs = append(s.locs, x)
					case 2:
						s.values = append(s.values, int64(x))
					}
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := eachField(v, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
				switch num {
				case 1:
					id = n
				case 4: // line
					return eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
						if num == 1 {
							fns = append(fns, n)
						}
						return nil
					})
				}
				return nil
			})
			locations[id] = fns
			return err
		case 5: // function
			var id uint64
			var name int64
			err := eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
				switch num {
				case 1:
					id = n
				case 2:
					name = int64(n)
				}
				return nil
			})
			functions[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		case 10: // duration_nanos
			p.durationNanos = int64(n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	valueIdx := -1
	for i, t := range types {
		if int(t) < len(strs) && strs[t] == "cpu" {
			valueIdx = i
		}
	}
	if valueIdx < 0 {
		return nil, fmt.Errorf("%s: not a CPU profile", path)
	}
	for _, s := range samples {
		if valueIdx >= len(s.values) {
			continue
		}
		var stack []string
		for _, loc := range s.locs {
			for _, fn := range locations[loc] {
				if idx := functions[fn]; int(idx) < len(strs) {
					stack = append(stack, strs[idx])
				}
			}
		}
		p.samples = append(p.samples, sample{nanos: s.values[valueIdx], stack: stack})
	}
	return &p, nil
}

// eachField calls f for every field of a message: v holds a length-delimited field's bytes, n a varint's or
// fixed field's value.
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// repeatedVarint reads a repeated integer field, packed or not.
func repeatedVarint(typ protowire.Type, v []byte, n uint64) ([]uint64, error) {
	if typ == protowire.VarintType {
		return []uint64{n}, nil
	}
	if typ != protowire.BytesType {
		return nil, errors.New("unexpected wire type for a repeated integer")
	}
	var out []uint64
	for len(v) > 0 {
		x, k := protowire.ConsumeVarint(v)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		out = append(out, x)
		v = v[k:]
	}
	return out, nil
}

// category is a share of the CPU: the samples with any frame matching re (categories overlap).
type category struct {
	name string
	re   *regexp.Regexp
	// not, when set, leaves out the samples with a frame matching it.
	not *regexp.Regexp
}

// rpcHandler is a gRPC method's handling, the same whichever transport serves it.
var rpcHandler = regexp.MustCompile(`^google\.golang\.org/grpc\.\(\*Server\)\.(processUnaryRPC|processStreamingRPC)$`)

var syscallFrames = regexp.MustCompile(`^syscall\.|^internal/runtime/syscall|^runtime/internal/syscall`)

var categories = []category{
	{"crypto/tls, all of it (record layer, handshakes, and the crypto and syscalls below them)", regexp.MustCompile(`^crypto/tls\.`), nil},
	{"  crypto/tls without the syscalls below it", regexp.MustCompile(`^crypto/tls\.`), syscallFrames},
	{"  record encryption (AES-GCM, ChaCha20-Poly1305, GHASH)", regexp.MustCompile(`^crypto/internal/fips140/aes|^crypto/aes\.|^crypto/cipher\.|chacha20|poly1305`), nil},
	{"  TLS handshakes", regexp.MustCompile(`^crypto/tls\.\(\*Conn\)\.(handshakeContext|serverHandshake|clientHandshake)`), nil},
	{"  key exchange and signatures (ECDSA, ECDH, ML-KEM, P-256)", regexp.MustCompile(`ecdsa|ecdh|mlkem|nistec|x25519|bigmod`), nil},
	{"gRPC served by net/http's handler (grpc.Server.ServeHTTP, serverHandlerTransport), without etcd's handler below it", regexp.MustCompile(`grpc\.\(\*Server\)\.ServeHTTP|grpc/internal/transport\.\(\*serverHandlerTransport\)|grpc/internal/transport\.NewServerHandlerTransport`), rpcHandler},
	{"HTTP/2 server of x/net (serverConn, responseWriter, write scheduler, their TLS writes; not the framer gRPC shares), without etcd's handler", regexp.MustCompile(`^golang\.org/x/net/http2\.\(\*(serverConn|responseWriter|responseWriterState|requestBody|pipe|bufferedWriter|writeData|writeResHeaders)\)|^golang\.org/x/net/http2\.\(\*[a-zA-Z]*WriteScheduler\)|^net/http\.\(\*http2(serverConn|responseWriter)`), rpcHandler},
	{"HTTP/2 framing (x/net Framer, HPACK)", regexp.MustCompile(`^golang\.org/x/net/http2\.\(\*Framer\)|^golang\.org/x/net/http2/hpack\.`), nil},
	{"gRPC's own HTTP/2 transport (http2Server, loopyWriter, their TLS writes), without etcd's handler", regexp.MustCompile(`grpc/internal/transport\.\(\*http2Server\)|grpc/internal/transport\.\(\*loopyWriter\)|grpc/internal/transport\.\(\*controlBuffer\)|grpc/internal/transport\.\(\*bufWriter\)|grpc/internal/transport\.newHTTP2Server`), rpcHandler},
	{"etcd's gRPC handlers (grpc processUnaryRPC and below: the requests' own work)", rpcHandler, nil},
	{"peer links (rafthttp)", regexp.MustCompile(`/rafthttp\.`), nil},
	{"syscalls (read, write, fdatasync, ...)", syscallFrames, nil},
	{"scheduler and netpoll (futex, findRunnable, epoll)", regexp.MustCompile(`^runtime\.(schedule|findRunnable|futex|netpoll|stopm|startm|wakep|notesleep|notewakeup|mPark|park_m|mcall)$`), nil},
	{"garbage collector (marking, sweeping)", regexp.MustCompile(`^runtime\.gcBgMarkWorker|^runtime\.bgsweep|^runtime\.bgscavenge|^runtime\.gcAssistAlloc`), nil},
	{"allocation (mallocgc)", regexp.MustCompile(`^runtime\.mallocgc`), nil},
	{"write-ahead log", regexp.MustCompile(`/server/v3/wal\.|/storage/wal\.`), nil},
	{"bbolt", regexp.MustCompile(`^go\.etcd\.io/bbolt`), nil},
	{"raft", regexp.MustCompile(`^go\.etcd\.io/raft|/etcd/raft/v3`), nil},
}

// profileSet is the members' profiles of one variant in one round, summed.
type profileSet struct {
	variant    string
	round      int
	seconds    float64 // the profiles' duration
	cpu        float64 // CPU seconds sampled, all members
	writes     float64 // writes during the profiles (writes/s × duration)
	cum, flat  map[string]float64
	categories []float64
}

// analyzeDir prints where the members' CPU goes in each variant's profiled put phase, per write, and what
// each variant adds to plain's.
func analyzeDir(w *strings.Builder, dir string) error {
	var results []runResult
	if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
		_ = json.Unmarshal(b, &results)
	}
	rate := map[string]float64{}
	for _, r := range results {
		if r.Put != nil {
			rate[r.Variant+"/"+strconv.Itoa(r.Round)] = r.Put.PerSecond
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "profiles", "*_m[0-9].pprof"))
	sets := map[string]*profileSet{}
	var order []string
	for _, f := range files {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".pprof"), "_")
		if len(parts) != 3 {
			continue
		}
		round, _ := strconv.Atoi(strings.TrimPrefix(parts[1], "r"))
		key := parts[0] + "/" + strconv.Itoa(round)
		p, err := readProfile(f)
		if err != nil {
			return err
		}
		s := sets[key]
		if s == nil {
			s = &profileSet{variant: parts[0], round: round, cum: map[string]float64{}, flat: map[string]float64{},
				categories: make([]float64, len(categories))}
			sets[key] = s
			order = append(order, key)
		}
		s.seconds = float64(p.durationNanos) / 1e9
		s.writes = rate[key] * s.seconds
		for _, smp := range p.samples {
			sec := float64(smp.nanos) / 1e9
			s.cpu += sec
			if len(smp.stack) > 0 {
				s.flat[smp.stack[0]] += sec
			}
			seen := map[string]bool{}
			for _, fn := range smp.stack {
				if !seen[fn] {
					seen[fn] = true
					s.cum[fn] += sec
				}
			}
			for i, c := range categories {
				if anyFrame(smp.stack, c.re) && (c.not == nil || !anyFrame(smp.stack, c.not)) {
					s.categories[i] += sec
				}
			}
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("no member profiles in %s/profiles", dir)
	}
	sort.Strings(order)
	perWrite := func(s *profileSet, sec float64) float64 {
		if s.writes == 0 {
			return 0
		}
		return sec * 1e6 / s.writes
	}
	fmt.Fprintln(w, "### Where the members' CPU goes during puts (three members summed, µs of CPU per write)")
	fmt.Fprintln(w)
	header, sep := "| category |", "|---|"
	for _, k := range order {
		header += fmt.Sprintf(" %s (r%d) |", sets[k].variant, sets[k].round)
		sep += "---|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, sep)
	row := "| all CPU sampled |"
	for _, k := range order {
		s := sets[k]
		row += fmt.Sprintf(" %.0f (%.1f s, %.0f writes/s) |", perWrite(s, s.cpu), s.cpu, s.writes/s.seconds)
	}
	fmt.Fprintln(w, row)
	for i, c := range categories {
		row := "| " + strings.ReplaceAll(c.name, "  ", "↳ ") + " |"
		for _, k := range order {
			s := sets[k]
			row += fmt.Sprintf(" %.0f (%.0f%%) |", perWrite(s, s.categories[i]), 100*s.categories[i]/s.cpu)
		}
		fmt.Fprintln(w, row)
	}

	var plain *profileSet
	for _, k := range order {
		if sets[k].variant == "plain" {
			plain = sets[k]
			break
		}
	}
	if plain == nil {
		return nil
	}
	for _, k := range order {
		s := sets[k]
		if s == plain {
			continue
		}
		fmt.Fprintf(w, "\n#### %s (r%d) against plain (r%d): µs of CPU per write\n\n", s.variant, s.round, plain.round)
		fmt.Fprintf(w, "Total: %.0f against %.0f (%+.0f).\n\n", perWrite(s, s.cpu), perWrite(plain, plain.cpu), perWrite(s, s.cpu)-perWrite(plain, plain.cpu))
		for _, kind := range []string{"cum", "flat"} {
			a, b := s.cum, plain.cum
			if kind == "flat" {
				a, b = s.flat, plain.flat
			}
			type delta struct {
				fn       string
				d, x, pl float64
			}
			var ds []delta
			for fn := range union(a, b) {
				x, y := perWrite(s, a[fn]), perWrite(plain, b[fn])
				ds = append(ds, delta{fn, x - y, x, y})
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i].d > ds[j].d })
			fmt.Fprintf(w, "| largest increases, %s | %s | plain | Δ |\n|---|---|---|---|\n", kind, s.variant)
			for _, d := range ds[:min(15, len(ds))] {
				fmt.Fprintf(w, "| `%s` | %.1f | %.1f | %+.1f |\n", d.fn, d.x, d.pl, d.d)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

func anyFrame(stack []string, re *regexp.Regexp) bool {
	for _, fn := range stack {
		if re.MatchString(fn) {
			return true
		}
	}
	return false
}

func union(a, b map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

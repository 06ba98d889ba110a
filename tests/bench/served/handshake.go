package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// measureHandshakes measures the CPU of full TLS handshakes between a client with the operator's client
// configuration and a server with a member's certificate that requires a client certificate (both ends in
// this process, over net.Pipe), for the key exchanges Go offers.
func measureHandshakes(w *strings.Builder, n int) error {
	dir, err := os.MkdirTemp("", "served-handshakes")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	certs, err := newCertificates(dir)
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cases := []struct {
		name   string
		curves []tls.CurveID
		max    uint16
	}{
		{"Go's default (TLS 1.3, X25519MLKEM768 hybrid)", nil, 0},
		{"TLS 1.3, X25519", []tls.CurveID{tls.X25519}, 0},
		{"TLS 1.3, P-256", []tls.CurveID{tls.CurveP256}, 0},
		{"TLS 1.2, ECDHE X25519", []tls.CurveID{tls.X25519}, tls.VersionTLS12},
	}
	fmt.Fprintf(w, "\n### CPU of one full TLS handshake (client and server together, ECDSA P-256 certificates, client certificate required), %d handshakes each\n\n", n)
	fmt.Fprintln(w, "| key exchange | CPU ms per handshake | wall ms per handshake |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range cases {
		server := &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}, CurvePreferences: c.curves}
		client := certs.client.Clone()
		client.ServerName = "localhost"
		client.NextProtos = []string{"h2"}
		client.CurvePreferences = c.curves
		client.MaxVersion = c.max
		cpu0, t0 := selfCPU(), time.Now()
		for range n {
			a, b := net.Pipe()
			errc := make(chan error, 1)
			go func() { errc <- tls.Server(a, server).Handshake() }()
			cerr := tls.Client(b, client).Handshake()
			serr := <-errc
			_ = a.Close()
			_ = b.Close()
			if cerr != nil || serr != nil {
				return fmt.Errorf("%s: client %v, server %v", c.name, cerr, serr)
			}
		}
		cpu, wall := selfCPU()-cpu0, time.Since(t0)
		fmt.Fprintf(w, "| %s | %.3f | %.3f |\n", c.name, cpu*1000/float64(n), float64(wall.Microseconds())/1000/float64(n))
	}
	return nil
}

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

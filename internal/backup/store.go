package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Object is one stored snapshot.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Store is where snapshots live: a directory on a PersistentVolumeClaim or a bucket in an S3-compatible
// object store. Keys are slash-separated paths relative to the store's root.
type Store interface {
	// Put stores the local file under key; the object appears complete or not at all.
	Put(ctx context.Context, key, file string, meta map[string]string) error
	// Get copies the object at key into the local file.
	Get(ctx context.Context, key, file string) error
	// List returns the objects whose keys start with prefix.
	List(ctx context.Context, prefix string) ([]Object, error)
	Delete(ctx context.Context, key string) error
	// Location is the user-facing address of key.
	Location(key string) string
}

// DirStore keeps snapshots in a directory: the mount of a backup PersistentVolumeClaim.
type DirStore struct {
	Root string
	// Claim names the PersistentVolumeClaim mounted at Root (for locations).
	Claim string
}

func (s *DirStore) path(key string) (string, error) {
	clean := path.Clean("/" + key)
	if clean == "/" || strings.Contains(key, "..") {
		return "", fmt.Errorf("invalid key %q", key)
	}
	return filepath.Join(s.Root, filepath.FromSlash(clean)), nil
}

// Put moves the file into place (or copies it, across file systems) through a temporary name and an
// fsync, so a reader never sees a partial snapshot.
func (s *DirStore) Put(_ context.Context, key, file string, _ map[string]string) error {
	dst, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := dst + ".part"
	if err := os.Rename(file, tmp); err != nil {
		if err := copyFile(file, tmp); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

func (s *DirStore) Get(_ context.Context, key, file string) error {
	src, err := s.path(key)
	if err != nil {
		return err
	}
	return copyFile(src, file)
}

func (s *DirStore) List(_ context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".part") {
			return nil
		}
		rel, err := filepath.Rel(s.Root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Object{Key: key, Size: info.Size(), LastModified: info.ModTime()})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, err
}

func (s *DirStore) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *DirStore) Location(key string) string { return "pvc://" + s.Claim + "/" + key }

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// S3Config addresses a bucket in an S3-compatible object store.
type S3Config struct {
	Endpoint  string // http(s)://host[:port]
	Bucket    string
	Region    string
	AccessKey string
	SecretKey string
	// CAFile, when set, is the only CA trusted for the endpoint's certificate.
	CAFile string
}

// S3Store keeps snapshots in a bucket.
type S3Store struct {
	client *minio.Client
	bucket string
}

// NewS3Store connects to the bucket (lazily: the first request reports unreachable endpoints).
func NewS3Store(cfg S3Config) (*S3Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("S3 endpoint %q must be an http or https URL", cfg.Endpoint)
	}
	opts := &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: cfg.Region,
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("S3 CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("S3 CA %s holds no PEM certificate", cfg.CAFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		opts.Transport = tr
	}
	c, err := minio.New(u.Host, opts)
	if err != nil {
		return nil, err
	}
	return &S3Store{client: c, bucket: cfg.Bucket}, nil
}

// Put uploads the file; S3 makes an object visible only when its upload completes.
func (s *S3Store) Put(ctx context.Context, key, file string, meta map[string]string) error {
	_, err := s.client.FPutObject(ctx, s.bucket, key, file, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: meta,
	})
	if err != nil {
		return fmt.Errorf("upload s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}

func (s *S3Store) Get(ctx context.Context, key, file string) error {
	if err := s.client.FGetObject(ctx, s.bucket, key, file, minio.GetObjectOptions{}); err != nil {
		return fmt.Errorf("download s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}

func (s *S3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", s.bucket, prefix, o.Err)
		}
		out = append(out, Object{Key: o.Key, Size: o.Size, LastModified: o.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}

func (s *S3Store) Location(key string) string { return "s3://" + s.bucket + "/" + key }

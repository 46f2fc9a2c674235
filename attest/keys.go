package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Key file names written by WriteKeyPair.
const (
	PrivateKeyFile = "horizon.key"
	PublicKeyFile  = "horizon.pub"
)

// PEM block types (PKCS #8 and PKIX, as openssl writes them).
const (
	pemPrivate = "PRIVATE KEY"
	pemPublic  = "PUBLIC KEY"
)

// ErrKeyExists is returned (wrapped) by WriteKeyPair when a key file is
// already there: a key pair is never overwritten, since losing a private
// key whose public half has been published cannot be undone.
var ErrKeyExists = errors.New("key file already exists")

// ErrBadKey is returned (wrapped) when a key file is not the PEM ed25519
// key it should be.
var ErrBadKey = errors.New("not an ed25519 key file")

// GenerateKey returns a new ed25519 key pair from crypto/rand.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return pub, priv, nil
}

// KeyID is the lowercase hex SHA-256 of the raw public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// WriteKeyPair generates a key pair and writes dir/horizon.key (PKCS #8
// PEM, mode 0600) and dir/horizon.pub (PKIX PEM, mode 0644), creating dir
// (mode 0700) if needed. It refuses, writing nothing, when either file
// exists. It returns the paths written and the key id.
func WriteKeyPair(dir string) (privPath, pubPath, keyID string, err error) {
	privPath = filepath.Join(dir, PrivateKeyFile)
	pubPath = filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", "", fmt.Errorf("%s: %w (refusing to overwrite a key pair; choose another --out)", p, ErrKeyExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", "", fmt.Errorf("%s: %w", p, err)
		}
	}
	pub, priv, err := GenerateKey()
	if err != nil {
		return "", "", "", err
	}
	privPEM, pubPEM, err := encodePEM(pub, priv)
	if err != nil {
		return "", "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", fmt.Errorf("key directory: %w", err)
	}
	if err := writeExclusive(privPath, privPEM, 0o600); err != nil {
		return "", "", "", err
	}
	if err := writeExclusive(pubPath, pubPEM, 0o644); err != nil {
		os.Remove(privPath) // a private key without its public half is of no use
		return "", "", "", err
	}
	return privPath, pubPath, KeyID(pub), nil
}

func encodePEM(pub ed25519.PublicKey, priv ed25519.PrivateKey) (privPEM, pubPEM []byte, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encode private key: %w", err)
	}
	privPEM = pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der})
	der, err = x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("encode public key: %w", err)
	}
	pubPEM = pem.EncodeToMemory(&pem.Block{Type: pemPublic, Bytes: der})
	return privPEM, pubPEM, nil
}

// writeExclusive creates path (failing if it exists, even if it appeared
// since the check) with mode perm and writes data to it.
func writeExclusive(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrKeyExists)
		}
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// LoadPublicKey reads a PKIX PEM ed25519 public key (horizon.pub).
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, pemPublic)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrBadKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: %w: it holds a %T", path, ErrBadKey, k)
	}
	return pub, nil
}

// LoadPrivateKey reads a PKCS #8 PEM ed25519 private key (horizon.key).
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, pemPrivate)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrBadKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: %w: it holds a %T", path, ErrBadKey, k)
	}
	return priv, nil
}

// readPEM returns the DER bytes of the one PEM block of type typ in path.
func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, rest := pem.Decode(b)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%s: %w: no PEM block", path, ErrBadKey)
	case block.Type != typ:
		hint := ""
		if block.Type == pemPrivate {
			hint = " (this is a private key: pass horizon.pub)"
		} else if block.Type == pemPublic {
			hint = " (this is a public key: pass horizon.key)"
		}
		return nil, fmt.Errorf("%s: %w: PEM block %q, want %q%s", path, ErrBadKey, block.Type, typ, hint)
	case len(block.Headers) != 0 || len(bytes.TrimSpace(rest)) != 0:
		return nil, fmt.Errorf("%s: %w: want exactly one PEM block without headers", path, ErrBadKey)
	}
	return block.Bytes, nil
}

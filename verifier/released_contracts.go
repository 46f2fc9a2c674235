package verifier

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"sort"

	"gopkg.in/yaml.v3"
)

// releasedContracts are the contracts this project releases, by id, with
// the canonical SHA-256 of each (CanonicalHash of the contract's JSON form,
// the hash an edition's contract.json carries). An edition citing a
// contract outside this table, or a known id with another hash, is an
// error unless the contract is given explicitly (Options.ContractFile):
// otherwise a forger could relax the contract (fewer blocks, a shorter
// warmup, a required zero no longer required), re-freeze its hash and
// verify against the weaker terms. TestReleasedContracts holds this table
// to contracts/*.yaml; a new contract is released by adding it here.
var releasedContracts = map[string]string{
	"PERF-REAL-v1":          "1b5fae0c70170f91f33608092c2156466cd075ff624e2fa33cfe041ec84a99bb",
	"PERF-POLICY-v1":        "15eba5e6741ac9eb2d062fefe159182c5cc4eb3830f5b6a1f1acf0d2686403fc",
	"PERF-PREFILL-v1":       "a44efd8668dff6f6a870e1d15db955bd15e4ab0aabb1c2e90cc1b45d1caa8627",
	"PERF-PREFILL-SMOKE-v1": "a14d0e64701911b3fe4a76d8bc2e3be9736a34e2754339410aebc65e4b7738a7",
	"PERF-DEPTH-v1":         "be1454cc0745b66b73a0cf995e45e14fd91e83e5ccbff094583124538e8c8544",
	"PERF-DEPTH-SMOKE-v1":   "9f4bd0d0e700637756eaaadbc4f0f5098c2288335f671685cb156441c693eb4f",
}

// readYAMLTree reads a YAML file into the generic JSON tree the verifier
// works on (objects, arrays, json.Number numbers), through encoding/json so
// that numbers are written the way Go's JSON encoder writes them: that is
// how the writer turns a contract or campaign YAML into its frozen JSON.
// Mapping keys must be strings.
func readYAMLTree(path string) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	y, err = stringKeys(y)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("%s as JSON: %w", path, err)
	}
	tree, err := parseTree(j)
	if err != nil {
		return nil, fmt.Errorf("%s as JSON: %w", path, err)
	}
	return tree, nil
}

// stringKeys turns yaml.v3's map[any]any (which it produces for a mapping
// with a non-string key) into map[string]any, or fails.
func stringKeys(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			x[k] = e
		}
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string", k)
			}
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			out[s] = e
		}
		return out, nil
	case []any:
		for i, e := range x {
			e, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			x[i] = e
		}
		return x, nil
	}
	return v, nil
}

// contractFileHash is the canonical hash of the contract YAML at path.
func contractFileHash(path string) (id, sha string, err error) {
	tree, err := readYAMLTree(path)
	if err != nil {
		return "", "", err
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return "", "", fmt.Errorf("%s: a contract is a mapping", path)
	}
	id, _ = m["id"].(string)
	sha, err = CanonicalHash(tree)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	return id, sha, nil
}

// declaredMismatch is one place where a frozen document departs from the
// YAML it claims to be.
type declaredMismatch struct {
	pointer     string // into the YAML's tree (the frozen member has the same shape)
	want, found any
	why         string
}

// compareDeclared compares a YAML tree (what a file declares) with a frozen
// tree: every key the YAML declares must be in the frozen tree with an
// equal value (numbers compared as numbers, exactly), arrays element by
// element with the same length. Keys the frozen tree has beyond the YAML's
// are not compared: they are the loader's defaults, and this generic
// comparison cannot tell a default from an addition (a known weak spot).
// base prefixes the pointers reported.
func compareDeclared(base string, declared, frozen any, out *[]declaredMismatch) {
	switch d := declared.(type) {
	case map[string]any:
		f, ok := frozen.(map[string]any)
		if !ok {
			*out = append(*out, declaredMismatch{base, "an object", jsonKind(frozen), "not an object"})
			return
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := base + ptr(k)
			fv, ok := f[k]
			if !ok {
				*out = append(*out, declaredMismatch{p, d[k], nil, "declared but absent"})
				continue
			}
			compareDeclared(p, d[k], fv, out)
		}
	case []any:
		f, ok := frozen.([]any)
		if !ok || len(f) != len(d) {
			n := -1
			if ok {
				n = len(f)
			}
			*out = append(*out, declaredMismatch{base, len(d), n, "a list of another length"})
			return
		}
		for i := range d {
			compareDeclared(fmt.Sprintf("%s/%d", base, i), d[i], f[i], out)
		}
	case json.Number:
		f, ok := frozen.(json.Number)
		if !ok || !sameNumber(d, f) {
			*out = append(*out, declaredMismatch{base, d, frozen, "another value"})
		}
	default:
		if declared != frozen {
			*out = append(*out, declaredMismatch{base, declared, frozen, "another value"})
		}
	}
}

// sameNumber compares two JSON numbers exactly, as rationals (so 64 and
// 64.0 are equal, and integers beyond 2^53 are not rounded).
func sameNumber(a, b json.Number) bool {
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	return okx && oky && x.Cmp(y) == 0
}

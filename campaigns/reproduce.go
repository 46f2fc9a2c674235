package campaigns

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/horizon-runmap/horizon/editions"
)

// SameTokens checks that two editions of one campaign produced the same
// tokens: the same workers, and in each the same warmup tokens and, per
// measured request, the same prompt, prompt token ids and output token ids.
// Timings (and everything derived from them) may differ; token ids may
// not, because selection is greedy and the CPU backend's reductions run in
// a fixed order.
func SameTokens(a, b string) error {
	wa, err := rawFiles(a)
	if err != nil {
		return err
	}
	wb, err := rawFiles(b)
	if err != nil {
		return err
	}
	if !slices.Equal(wa, wb) {
		return fmt.Errorf("%s has raw records %v, %s has %v", a, wa, b, wb)
	}
	for _, rel := range wa {
		ra, err := readRecord(filepath.Join(a, rel))
		if err != nil {
			return err
		}
		rb, err := readRecord(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if !slices.Equal(ra.Warmup.TokenIDs, rb.Warmup.TokenIDs) {
			return fmt.Errorf("%s: warmup tokens differ", rel)
		}
		if len(ra.Requests) != len(rb.Requests) {
			return fmt.Errorf("%s: %d and %d requests", rel, len(ra.Requests), len(rb.Requests))
		}
		for i := range ra.Requests {
			qa, qb := ra.Requests[i], rb.Requests[i]
			switch {
			case qa.PromptID != qb.PromptID || !slices.Equal(qa.PromptTokenIDs, qb.PromptTokenIDs):
				return fmt.Errorf("%s request %d: prompts differ (%s, %s)", rel, i, qa.PromptID, qb.PromptID)
			case !slices.Equal(qa.TokenIDs, qb.TokenIDs):
				return fmt.Errorf("%s request %d (%s): output token ids differ", rel, i, qa.PromptID)
			case qa.Cache.Misses != qb.Cache.Misses || qa.Cache.H2DBytes != qb.Cache.H2DBytes:
				return fmt.Errorf("%s request %d (%s): cache traffic differs (%d vs %d misses)", rel, i, qa.PromptID, qa.Cache.Misses, qb.Cache.Misses)
			}
		}
	}
	return nil
}

// rawFiles lists an edition's raw records from its manifest.
func rawFiles(dir string) ([]string, error) { return rawFilesLike(dir, "raw/*/block-*.json") }

// rawFilesLike lists the manifest's files that match pattern.
func rawFilesLike(dir, pattern string) ([]string, error) {
	var m editions.Manifest
	if err := readJSONStrict(filepath.Join(dir, editions.ManifestFile), &m); err != nil {
		return nil, err
	}
	var out []string
	for _, f := range m.Files {
		if matched, _ := filepath.Match(pattern, f.Path); matched {
			out = append(out, f.Path)
		}
	}
	return out, nil
}

package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileName is the name of the tokenizer file in a checkpoint directory.
const FileName = "tokenizer.json"

// Load reads dir/tokenizer.json. Horizon's byte-level description (as
// written by WriteByteLevelJSON) gives a *ByteLevel; any other byte-level
// BPE tokenizer.json gives an *HF. Errors name the file and say what is
// wrong; a missing file gives an error that matches fs.ErrNotExist, an
// unsupported feature one that matches ErrUnsupported.
func Load(dir string) (Tokenizer, error) {
	return LoadFile(filepath.Join(dir, FileName))
}

// LoadFile is Load for a tokenizer.json at an explicit path.
func LoadFile(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %s: file not found: %w", path, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return parse(path, data, false)
}

// parse builds the tokenizer of a tokenizer.json; forceHF skips the
// recognition of Horizon's byte-level description.
func parse(path string, data []byte, forceHF bool) (Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: invalid JSON: %s", path, describeJSONError(data, err))
	}
	if !forceHF {
		if bl, ok := recogniseByteLevel(&f); ok {
			return bl, nil
		}
	}
	hf, err := newHF(&f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return hf, nil
}

func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
	return fmt.Sprintf("%v (line %d, column %d)", err, line, col)
}

// recogniseByteLevel reports whether f is exactly Horizon's byte-level
// description (see the package documentation) and returns its tokenizer.
func recogniseByteLevel(f *hfFile) (*ByteLevel, bool) {
	if !isNull(f.Normalizer) {
		return nil, false
	}
	var pre struct {
		Type           string `json:"type"`
		AddPrefixSpace *bool  `json:"add_prefix_space"`
	}
	if json.Unmarshal(f.PreTokenizer, &pre) != nil || pre.Type != "ByteLevel" ||
		pre.AddPrefixSpace == nil || *pre.AddPrefixSpace {
		return nil, false
	}
	var typ struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(f.Decoder, &typ) != nil || typ.Type != "ByteLevel" {
		return nil, false
	}
	if !isNull(f.PostProcessor) {
		typ.Type = ""
		if json.Unmarshal(f.PostProcessor, &typ) != nil || typ.Type != "ByteLevel" {
			return nil, false
		}
	}
	var m hfModelSection
	if json.Unmarshal(f.Model, &m) != nil || m.Type != "BPE" ||
		(m.Dropout != nil && *m.Dropout != 0) || m.UnkToken != nil ||
		(m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") ||
		(m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, false
	}
	if merges, err := parseMerges(m.Merges); err != nil || len(merges) != 0 {
		return nil, false
	}
	vocab := map[string]int{}
	if json.Unmarshal(m.Vocab, &vocab) != nil {
		return nil, false
	}
	vocabSize := len(vocab)
	eos := make([]int, 0, len(f.AddedTokens))
	for _, a := range f.AddedTokens {
		eos = append(eos, a.ID)
	}
	if checkByteLevelArgs(vocabSize, eos) != nil {
		return nil, false
	}
	for _, a := range f.AddedTokens {
		name, _ := byteLevelTokenName(a.ID, eos)
		if a.Content != name || !a.Special || a.SingleWord || a.LStrip || a.RStrip ||
			(a.Normalized != nil && *a.Normalized) {
			return nil, false
		}
	}
	seen := make([]bool, vocabSize)
	for tok, id := range vocab {
		if id < 0 || id >= vocabSize || seen[id] {
			return nil, false
		}
		seen[id] = true
		var want string
		if id < 256 {
			want = string(byteToRune[id])
		} else {
			want, _ = byteLevelTokenName(id, eos)
		}
		if tok != want {
			return nil, false
		}
	}
	return NewByteLevel(vocabSize, eos), true
}

package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel is the BPE model of a tokenizer.json, with the semantics of the
// Rust `tokenizers` BPE (without dropout).
type bpeModel struct {
	vocab        map[string]int
	vocabR       map[int]string
	merges       map[[2]int]bpeMerge
	unkID        int // -1: no unk token
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool

	mu    sync.Mutex
	cache map[string][]int
}

type bpeMerge struct{ rank, newID int }

const (
	bpeCacheCap     = 10000
	bpeCacheMaxWord = 256 // bytes; longer words are not cached
)

// hfModelSection is the "model" section of a tokenizer.json.
type hfModelSection struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// modelType returns the model type, inferring BPE from a merges list when
// "type" is absent (as old files written by the Rust library lack it).
func (m *hfModelSection) modelType() string {
	if m.Type == "" && len(m.Merges) > 0 {
		return "BPE"
	}
	return m.Type
}

// parseMerges accepts both merge encodings: "a b" strings and ["a", "b"] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("model.merges is not a list: %v", err)
	}
	out := make([][2]string, 0, len(items))
	for i, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("model.merges[%d] %q is not two tokens separated by one space", i, s)
			}
			out = append(out, [2]string{a, b})
			continue
		}
		var pair []string
		if err := json.Unmarshal(it, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		out = append(out, [2]string{pair[0], pair[1]})
	}
	return out, nil
}

func newBPEModel(m *hfModelSection) (*bpeModel, error) {
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("%w: BPE dropout %v (non-deterministic)", ErrUnsupported, *m.Dropout)
	}
	vocab := map[string]int{}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("model.vocab is missing")
	}
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("model.vocab is not an object of token ids: %v", err)
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b := &bpeModel{
		vocab:        vocab,
		vocabR:       make(map[int]string, len(vocab)),
		merges:       make(map[[2]int]bpeMerge, len(merges)),
		unkID:        -1,
		fuseUnk:      m.FuseUnk,
		byteFallback: m.ByteFallback,
		ignoreMerges: m.IgnoreMerges,
		cache:        map[string][]int{},
	}
	for tok, id := range vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab: token %q has negative id %d", tok, id)
		}
		if prev, dup := b.vocabR[id]; dup {
			return nil, fmt.Errorf("model.vocab: id %d is used by both %q and %q", id, prev, tok)
		}
		b.vocabR[id] = tok
	}
	if m.ContinuingSubwordPrefix != nil {
		b.prefix = *m.ContinuingSubwordPrefix
	}
	if m.EndOfWordSuffix != nil {
		b.suffix = *m.EndOfWordSuffix
	}
	if m.UnkToken != nil {
		id, ok := vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token %q is not in model.vocab", *m.UnkToken)
		}
		b.unkID = id
	}
	for rank, mg := range merges {
		a, okA := vocab[mg[0]]
		c, okC := vocab[mg[1]]
		if !okA || !okC {
			return nil, fmt.Errorf("model.merges[%d] %q %q: token not in model.vocab", rank, mg[0], mg[1])
		}
		right := mg[1]
		if b.prefix != "" {
			right = strings.TrimPrefix(right, b.prefix)
		}
		newID, ok := vocab[mg[0]+right]
		if !ok {
			return nil, fmt.Errorf("model.merges[%d]: merged token %q is not in model.vocab", rank, mg[0]+right)
		}
		b.merges[[2]int{a, c}] = bpeMerge{rank: rank, newID: newID}
	}
	return b, nil
}

// tokenize returns the ids of one pre-tokenized word.
func (b *bpeModel) tokenize(word string) []int {
	if word == "" {
		return nil
	}
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return []int{id}
		}
	}
	cacheable := len(word) <= bpeCacheMaxWord
	if cacheable {
		b.mu.Lock()
		ids, ok := b.cache[word]
		b.mu.Unlock()
		if ok {
			return ids
		}
	}
	ids := b.mergeWord(word)
	if cacheable {
		b.mu.Lock()
		if len(b.cache) >= bpeCacheCap {
			clear(b.cache)
		}
		b.cache[word] = ids
		b.mu.Unlock()
	}
	return ids
}

type bpeSymbol struct {
	id, prev, next int
	dead           bool
}

// mergeWord splits word into characters (with unk, byte fallback, prefix and
// suffix handling) and applies the merges, lowest rank first and, among equal
// ranks, leftmost first.
func (b *bpeModel) mergeWord(word string) []int {
	syms := make([]bpeSymbol, 0, utf8.RuneCountInString(word))
	add := func(id int) {
		syms = append(syms, bpeSymbol{id: id, prev: len(syms) - 1, next: len(syms) + 1})
	}
	pendingUnk := false
	flushUnk := func() {
		if pendingUnk {
			add(b.unkID)
			pendingUnk = false
		}
	}
	for i := 0; i < len(word); {
		_, w := utf8.DecodeRuneInString(word[i:])
		s := word[i : i+w]
		if i > 0 && b.prefix != "" {
			s = b.prefix + s
		}
		i += w
		if i == len(word) && b.suffix != "" {
			s += b.suffix
		}
		if id, ok := b.vocab[s]; ok {
			flushUnk()
			add(id)
			continue
		}
		if b.byteFallback {
			ids := make([]int, 0, len(s))
			for j := 0; j < len(s); j++ {
				id, ok := b.vocab[fmt.Sprintf("<0x%02X>", s[j])]
				if !ok {
					ids = nil
					break
				}
				ids = append(ids, id)
			}
			if ids != nil {
				flushUnk()
				for _, id := range ids {
					add(id)
				}
				continue
			}
		}
		if b.unkID >= 0 {
			if !b.fuseUnk {
				flushUnk()
			}
			pendingUnk = true
		}
		// Without an unk token the character is dropped, as in the Rust library.
	}
	flushUnk()
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1

	q := &mergeQueue{}
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := b.merges[[2]int{syms[i].id, syms[i+1].id}]; ok {
			heap.Push(q, queuedMerge{pos: i, rank: m.rank, newID: m.newID})
		}
	}
	for q.Len() > 0 {
		top := heap.Pop(q).(queuedMerge)
		cur := &syms[top.pos]
		if cur.dead || cur.next == -1 {
			continue
		}
		right := syms[cur.next]
		if m, ok := b.merges[[2]int{cur.id, right.id}]; !ok || m.newID != top.newID {
			continue // stale entry: one of the two symbols changed since it was queued
		}
		syms[cur.next].dead = true
		cur.id = top.newID
		cur.next = right.next
		if right.next != -1 {
			syms[right.next].prev = top.pos
		}
		if cur.prev != -1 {
			if m, ok := b.merges[[2]int{syms[cur.prev].id, cur.id}]; ok {
				heap.Push(q, queuedMerge{pos: cur.prev, rank: m.rank, newID: m.newID})
			}
		}
		if cur.next != -1 {
			if m, ok := b.merges[[2]int{cur.id, syms[cur.next].id}]; ok {
				heap.Push(q, queuedMerge{pos: top.pos, rank: m.rank, newID: m.newID})
			}
		}
	}
	ids := make([]int, 0, len(syms))
	for i := 0; i != -1; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

type queuedMerge struct{ pos, rank, newID int }

// mergeQueue is a min-heap on (rank, pos).
type mergeQueue []queuedMerge

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(queuedMerge)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

package report

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
)

var update = flag.Bool("update", false, "rewrite the golden routing summaries in testdata/")

// trace encodes lease events, one per expert id, on layer 0.
func trace(t *testing.T, ids ...int) *editions.RoutingTrace {
	t.Helper()
	var evs []eviction.Event
	for _, e := range ids {
		evs = append(evs, eviction.Event{Kind: eviction.KindLease, IDs: []int{e}})
	}
	data, err := eviction.Encode(evs)
	if err != nil {
		t.Fatal(err)
	}
	return &editions.RoutingTrace{Format: eviction.TraceFormat, Events: len(evs), Data: data}
}

// routed is one configuration of a one-layer, 4-expert, top-1 model:
// its capacity, policy and prefetch, its recorded counters, and its
// warmup and requests' routing (nil: no traces).
type routed struct {
	id, policy, prefetch string
	capacity             int
	misses, hits         int64
	warmup               []int
	requests             [][]int
	// partial drops the trace of its last request.
	partial bool
}

func routedEdition(t *testing.T, cs []routed) (map[string][]*editions.RawRecord, []editions.ConfigDoc) {
	t.Helper()
	seed := int64(7)
	recs := map[string][]*editions.RawRecord{}
	var docs []editions.ConfigDoc
	for _, c := range cs {
		r := &editions.RawRecord{ConfigID: c.id, Block: 1,
			Setup: editions.Setup{Model: editions.Model{Layers: 1, ExpertsPerLayer: 4, TopK: 1}, Capacity: c.capacity,
				Placement: "canonical", Policy: c.policy, Prefetch: c.prefetch},
			Artifact: editions.ArtifactRef{RecordBytes: 10}}
		if c.requests != nil {
			r.Warmup.RoutingTrace = trace(t, c.warmup...)
		}
		for i, q := range c.requests {
			req := editions.Request{}
			if !c.partial || i < len(c.requests)-1 {
				req.RoutingTrace = trace(t, q...)
			}
			r.Requests = append(r.Requests, req)
		}
		recs[c.id] = []*editions.RawRecord{r}
		d := editions.ConfigDoc{ID: c.id, Checkpoint: editions.Checkpoint{Kind: "synthetic", Arch: "m", Seed: &seed},
			Capacity: c.capacity, ExpertsPerLayer: 4, Policy: c.policy}
		d.Metrics.Misses, d.Metrics.Hits = c.misses, c.hits
		docs = append(docs, d)
	}
	return recs, docs
}

func TestEditionRouting(t *testing.T) {
	// Expert 0 takes 6 of 8 measured lookups, expert 1 one, expert 2 one.
	// Canonical placement publishes experts 0..capacity-1; the warmup's
	// expert 3 then evicts expert 0 (lru).
	skewed := [][]int{{0, 0, 0, 1}, {0, 0, 0, 2}}
	for _, tc := range []struct {
		name    string
		configs []routed
		err     string
		// want is the caveat, "" for no routing at all.
		want string
		// lru are LRU's replayed misses at the figure's capacities.
		caps []int
		lru  []int64
	}{
		{name: "no traces", configs: []routed{{id: "a", policy: "lru", capacity: 2, misses: 3, hits: 5, requests: nil}}},
		{name: "smallest partial capacity", configs: []routed{
			{id: "full", policy: "lru", capacity: 4, hits: 8, warmup: []int{3}, requests: skewed},
			{id: "c3", policy: "lru", capacity: 3, misses: 1, hits: 7, warmup: []int{3}, requests: skewed},
			{id: "c2", policy: "lru", capacity: 2, misses: 3, hits: 5, warmup: []int{3}, requests: skewed},
			{id: "c2-prefetch", policy: "lru", prefetch: "next-layer", capacity: 2, misses: 1, hits: 7, warmup: []int{3}, requests: skewed},
		},
			want: "synthetic m seed 7: routing is not uniform (synthetic router): at capacity 2 of 4 experts (the smallest partial capacity in this edition), the 2 most used experts of a layer take 87.5%-87.5% of the measured lookups (uniform: 2/4 = 50.0%); LRU misses 37.5% of lookups (recorded). Real routers differ.",
			caps: []int{1, 2, 3, 4}, lru: []int64{4, 3, 3, 0}},
		{name: "full residency only", configs: []routed{
			{id: "full", policy: "lru", capacity: 4, hits: 8, warmup: []int{3}, requests: [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}}},
		},
			want: "synthetic m seed 7: routing is close to uniform (synthetic router): at capacity 2 of 4 experts (half the experts (no partial capacity in this edition)), the 2 most used experts of a layer take 50.0%-50.0% of the measured lookups (uniform: 2/4 = 50.0%); LRU would miss 6 at this capacity (replayed from full; no configuration recorded it). Real routers differ.",
			caps: []int{1, 2, 3, 4}, lru: []int64{7, 6, 5, 0}},
		{name: "traces in part", configs: []routed{
			{id: "c2", policy: "lru", capacity: 2, warmup: []int{3}, requests: skewed, partial: true},
		}, err: "configuration c2 block 1: 2 of the warmup and 2 requests carry a routing trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, docs := routedEdition(t, tc.configs)
			got, err := editionRouting(&Campaign{}, recs, docs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("routing %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d models, want 1", len(got))
			}
			if c := got[0].caveat(); c != tc.want {
				t.Errorf("caveat\n got %s\nwant %s", c, tc.want)
			}
			if fmt.Sprint(got[0].caps) != fmt.Sprint(tc.caps) {
				t.Errorf("capacities %v, want %v", got[0].caps, tc.caps)
			}
			for _, c := range got[0].curves {
				if c.policy == "lru" && fmt.Sprint(c.misses) != fmt.Sprint(tc.lru) {
					t.Errorf("lru misses %v, want %v", c.misses, tc.lru)
				}
			}
		})
	}
}

// loadEdition reads a committed edition's documents and raw records.
// aggregateEdition aggregates every configuration of in from its records.
func aggregateEdition(t *testing.T, in EditionInput) (*Campaign, []editions.ConfigDoc) {
	t.Helper()
	c, err := CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		t.Fatal(err)
	}
	var docs []editions.ConfigDoc
	for i := range c.Configurations {
		d, err := Aggregate(c, contractOf(t, in), &c.Configurations[i], in.Records[c.Configurations[i].ID])
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return c, docs
}

func loadEdition(t *testing.T, name string) (EditionInput, editions.Manifest) {
	t.Helper()
	src := filepath.Join("..", "..", "editions", name)
	var in EditionInput
	var m editions.Manifest
	readJSON(t, filepath.Join(src, editions.CampaignFile), &in.CampaignDoc)
	readJSON(t, filepath.Join(src, editions.ContractFile), &in.ContractDoc)
	readJSON(t, filepath.Join(src, editions.ManifestFile), &m)
	c, err := CampaignFromDoc(in.CampaignDoc)
	if err != nil {
		t.Fatal(err)
	}
	in.RunDir, in.Records = src, map[string][]*editions.RawRecord{}
	for _, cfg := range c.Configurations {
		for b := 1; ; b++ {
			p := filepath.Join(src, filepath.FromSlash(editions.RawPath(cfg.ID, b)))
			if _, err := os.Stat(p); err != nil {
				break
			}
			var r editions.RawRecord
			readJSON(t, p, &r)
			in.Records[cfg.ID] = append(in.Records[cfg.ID], &r)
		}
		var d editions.ConfigDoc
		readJSON(t, filepath.Join(src, filepath.FromSlash(editions.ConfigPath(cfg.ID))), &d)
		in.WithoutUncertainty = d.Uncertainty == nil // an edition made before bootstrap-v1
	}
	return in, m
}

// TestCommittedEditionRouting pins what the committed editions' traces
// say (testdata/routing_<edition>.golden; -update rewrites it), checks that
// replaying the recorded policy at the recorded capacity gives the
// recorded misses, and that editions without traces get no routing.
func TestCommittedEditionRouting(t *testing.T) {
	for _, tc := range []struct {
		edition string
		traced  bool
	}{{"smoke-cpu", true}, {"smoke-cuda", true}, {"full-residency-v1", true}, {"residency-ablation", true}} {
		t.Run(tc.edition, func(t *testing.T) {
			in, _ := loadEdition(t, tc.edition)
			c, docs := aggregateEdition(t, in)
			routing, err := editionRouting(c, in.Records, docs)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.traced {
				if routing != nil {
					t.Fatalf("%d models with routing, want none", len(routing))
				}
				return
			}
			if len(routing) == 0 {
				t.Fatal("no routing read from an edition with traces")
			}
			var b strings.Builder
			for _, mr := range routing {
				fmt.Fprintf(&b, "%s\n\nreplayed %s:\n", mr.caveat(), mr.replay)
				for _, cv := range mr.curves {
					fmt.Fprintf(&b, "  %-7s %v at %v\n", cv.policy, cv.misses, mr.caps)
				}
				b.WriteString("\n")
				for _, d := range docs {
					if d.ID != mr.replay {
						continue
					}
					// the replayed configuration's own capacity is on the curve
					i := slices.Index(mr.caps, d.Capacity)
					if i < 0 {
						t.Fatalf("%s: capacity %d not among the replayed %v", d.ID, d.Capacity, mr.caps)
					}
					for _, cv := range mr.curves {
						if cv.policy == d.Policy && cv.misses[i] != d.Metrics.Misses {
							t.Errorf("%s: %s replayed at capacity %d misses %d, recorded %d", d.ID, d.Policy, d.Capacity, cv.misses[i], d.Metrics.Misses)
						}
					}
				}
			}
			golden := filepath.Join("testdata", "routing_"+tc.edition+".golden")
			if *update {
				if err := editions.WriteFileAtomic(golden, []byte(b.String())); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if b.String() != string(want) {
				t.Errorf("routing of %s differs from %s (run with -update):\n%s", tc.edition, golden, b.String())
			}
		})
	}
}

// contractOf is the frozen contract of an edition input.
func contractOf(t *testing.T, in EditionInput) *contracts.Contract {
	t.Helper()
	k, err := contracts.FromJSON(in.ContractDoc.Contract)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

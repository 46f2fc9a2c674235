package verifier

import "github.com/horizon-runmap/horizon/editions"

// declaredDType is a dtype a campaign configuration declares and every raw
// record states: the KV cache's (physics_kv.go), the routed experts'
// activations' (physics_activations.go) and the dense projections'
// activations' (physics_dense_activations.go). checkDeclaredDType holds every
// worker of a listed configuration to the declaration and, where the
// campaign does not list the configuration, its workers to their majority.
type declaredDType struct {
	id      string // the finding
	pointer string // the record field, a JSON pointer
	field   string // the campaign field, e.g. "kv"
	what    string // what the dtype is of, e.g. "KV cache"
	// declared is a configuration's declaration ("" where absent); want the
	// record value it declares; got a record's value (absent read as its
	// default).
	declared func(campaignConfig) string
	want     func(string) string
	got      func(*editions.RawRecord) string
}

func checkDeclaredDType(v *view, fs *findings, d declaredDType) {
	declared := map[string]string{}
	if cfgs, ok := campaignConfigs(v.e.docs[editions.CampaignFile]); ok {
		for _, cc := range cfgs {
			declared[cc.id] = d.declared(cc)
		}
	}
	for _, c := range v.configs {
		decl, listed := declared[c.id]
		if listed {
			want := d.want(decl)
			for _, w := range c.workers {
				if got := d.got(w.rec); got != want {
					fs.add(d.id, w.path, d.pointer, want, got,
						"the campaign declares %s %s for %s (%s %s); the worker ran %s", d.field, orDefault(decl, "fp32 (absent)"), c.id, want, d.what, got)
				}
			}
			continue
		}
		keys := make([]string, len(c.workers))
		for i, w := range c.workers {
			keys[i] = d.got(w.rec)
		}
		ref := majorityIndex(keys)
		for i, w := range c.workers {
			if keys[i] != keys[ref] {
				fs.add(d.id, w.path, d.pointer, keys[ref], keys[i],
					"%s's workers ran %s %s in the majority (e.g. %s); this one ran %s", c.id, keys[ref], d.what, c.workers[ref].path, keys[i])
			}
		}
	}
}

package campaigns

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
	"github.com/horizon-runmap/horizon/ifeval"
)

// A fidelity campaign (contract FIDELITY-v1 or FIDELITY-SMOKE-v1) has the
// IFEval campaign's file format and runner mechanics, with its
// configurations in arm pairs: for each checkpoint one configuration with
// the contract's reference expert_format (fp16) and one with its
// treatment's (int4), equal in everything else. A pair is named by its
// treatment's id. The unit of work is (pair, shard k): one worker process
// loads both arms, generates the shard's prompts with each, feeds the
// reference's tokens to the treatment arm, and writes
// raw/<pair>/shard-<k>.json. The edition's other documents come from
// report.WriteFidelityEdition.

// Pair is one arm pair of a fidelity campaign.
type Pair struct {
	Reference, Treatment *Configuration
}

// Pairs returns a validated fidelity campaign's arm pairs in the order of
// their treatment configurations, or one precise error: every
// configuration is an arm of exactly one pair, and a pair's arms differ
// in their id and expert_format only.
func (c *Campaign) Pairs(k *contracts.Fidelity) ([]Pair, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	var refs []*Configuration
	var pairs []Pair
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		switch cfg.ExpertFormat {
		case k.Arms.Reference:
			refs = append(refs, cfg)
		case k.Arms.Treatment:
			pairs = append(pairs, Pair{Treatment: cfg})
		default:
			return nil, bad("configuration %q: expert_format %s is neither arm of %s (%s, %s)", cfg.ID, cfg.ExpertFormat, k.ID, k.Arms.Reference, k.Arms.Treatment)
		}
	}
	used := map[string]bool{}
	for i := range pairs {
		t := pairs[i].Treatment
		for _, r := range refs {
			if sameArmTerms(r, t) {
				if pairs[i].Reference != nil {
					return nil, bad("configuration %q: two reference arms (%s, %s) match it", t.ID, pairs[i].Reference.ID, r.ID)
				}
				pairs[i].Reference = r
			}
		}
		if pairs[i].Reference == nil {
			return nil, bad("configuration %q: no %s configuration with the same checkpoint, capacity, executor and step terms to be its reference arm", t.ID, k.Arms.Reference)
		}
		if used[pairs[i].Reference.ID] {
			return nil, bad("configuration %q is the reference arm of two treatments", pairs[i].Reference.ID)
		}
		used[pairs[i].Reference.ID] = true
	}
	for _, r := range refs {
		if !used[r.ID] {
			return nil, bad("configuration %q: no %s configuration pairs with it", r.ID, k.Arms.Treatment)
		}
	}
	if len(pairs) == 0 {
		return nil, bad("no arm pairs")
	}
	return pairs, nil
}

// sameArmTerms: the two configurations are equal but for id and
// expert_format.
func sameArmTerms(a, b *Configuration) bool {
	x, y := *a, *b
	x.ID, y.ID, x.ExpertFormat, y.ExpertFormat = "", "", "", ""
	return reflect.DeepEqual(x, y)
}

// LoadFidelity reads a fidelity campaign and the built-in contract it
// names, and validates one against the other (the arms included).
func LoadFidelity(campaignPath string, cat Catalog) (*Campaign, *contracts.Fidelity, string, error) {
	c, err := LoadFile(campaignPath)
	if err != nil {
		return nil, nil, "", err
	}
	k, err := contracts.EmbeddedFidelity(c.Contract.ID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	sum, err := k.SHA256()
	if err != nil {
		return nil, nil, "", err
	}
	if err := c.Validate(k, sum, cat); err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	if _, err := c.Pairs(k); err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	if _, err := fidelity.Inputs(k); err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	if k.Scorer != ifeval.Rules.Version {
		return nil, nil, "", fmt.Errorf("campaign %s: %w: contract %s scores with %s, this build's scorer is %s", campaignPath, ErrInvalid, k.ID, k.Scorer, ifeval.Rules.Version)
	}
	return c, k, sum, nil
}

// FidelityContractDoc freezes a fidelity contract for contract.json.
func FidelityContractDoc(k *contracts.Fidelity) (editions.ContractDoc, error) {
	return builtinContractDoc(k, editions.SchemaFidelityContract)
}

// LoadFrozenFidelity reads the frozen campaign and fidelity contract a
// runner wrote for its workers, checking both hashes.
func LoadFrozenFidelity(campaignPath, contractPath string) (*Campaign, *contracts.Fidelity, string, error) {
	return loadFrozenBuiltin(campaignPath, contractPath, contracts.FidelityFromJSON)
}

// ReadFidelityShard reads a fidelity shard record strictly.
func ReadFidelityShard(path string) (*editions.FidelityShard, error) {
	return readShard[editions.FidelityShard](path)
}

// RunFidelity runs a fidelity campaign end to end, as RunIFEval runs an
// IFEval campaign, one worker per (pair, shard).
func RunFidelity(ctx context.Context, o RunOptions) (RunResult, error) {
	start := time.Now()
	prog := o.Progress
	if prog == nil {
		prog = quiet{}
	}
	if o.Runtime == nil {
		return RunResult{}, errors.New("campaigns: RunOptions.Runtime is nil (pass worker.Runtime{})")
	}
	if o.Contract != "" {
		return RunResult{}, fmt.Errorf("%w: fidelity contracts are built in; --contract does not apply", ErrInvalid)
	}
	c, k, ksum, err := LoadFidelity(o.Campaign, o.Runtime)
	if err != nil {
		return RunResult{}, err
	}
	pairs, err := c.Pairs(k)
	if err != nil {
		return RunResult{}, err
	}
	ins, err := fidelity.Inputs(k)
	if err != nil {
		return RunResult{}, err
	}
	res := RunResult{Edition: c.Edition, Dir: o.Out}
	campDoc, err := c.Doc()
	if err != nil {
		return res, err
	}
	contractDoc, err := FidelityContractDoc(k)
	if err != nil {
		return res, err
	}
	rs, err := setupRun(ctx, o, c, &res, campDoc, contractDoc, ReportTo(prog))
	if err != nil {
		return res, err
	}
	defer rs.unlock()
	runDir, artSHA := rs.runDir, rs.artSHA
	shards := k.Shards()
	if rs.left > 0 {
		res.Workers = len(pairs) * shards
		return res, &StoppedError{RunDir: runDir, Workers: res.Workers, Remaining: res.Workers, Artifacts: rs.left}
	}
	check := func(w worker) (*editions.FidelityShard, error) {
		s, err := ReadFidelityShard(filepath.Join(runDir, w.rel))
		if err != nil {
			return nil, err
		}
		if err := fidelity.CheckShard(k, ksum, ins, w.cfg.ID, w.block, s); err != nil {
			return nil, err
		}
		if s.Reference.ConfigID != w.ref.ID {
			return nil, fmt.Errorf("%s: reference arm %s, the campaign pairs %s with %s", w.rel, s.Reference.ConfigID, w.cfg.ID, w.ref.ID)
		}
		return s, nil
	}
	var plan []worker
	for _, p := range pairs {
		cfgIndex := slices.IndexFunc(c.Configurations, func(x Configuration) bool { return x.ID == p.Treatment.ID })
		for s := 1; s <= shards; s++ {
			w := worker{cfg: p.Treatment, ref: p.Reference, cfgIndex: cfgIndex, block: s, rel: filepath.FromSlash(editions.FidelityShardPath(p.Treatment.ID, s))}
			if w.key, err = workKey(c, p.Treatment, s, artSHA[p.Treatment.ID]+"+"+artSHA[p.Reference.ID], o.Build); err != nil {
				return res, err
			}
			plan = append(plan, w)
		}
	}
	err = shardRun[editions.FidelityShard]{
		plan:  plan,
		check: check,
		prompts: func(w worker) int64 {
			lo, hi := k.Generation().ShardRange(w.block)
			return int64(hi - lo)
		},
		// An upper bound: each prompt runs up to max_new_tokens three
		// times (the reference, the treatment, the treatment forced).
		tokens: 3 * int64(k.MaxNewTokens),
		arms:   len(pairs),
		say:    "scoring, pairing and writing the edition",
		write: func(dir string, records map[string][]*editions.FidelityShard) error {
			return report.WriteFidelityEdition(dir, report.FidelityInput{CampaignDoc: campDoc, ContractDoc: contractDoc, Shards: records, RunDir: runDir})
		},
	}.run(ctx, o, prog, c, rs, &res, shards)
	if err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// SameFidelityResponses checks that two fidelity editions hold the same
// shard records with the same responses of both arms and the same forced
// positions (a rerun on the same build and checkpoints must give them).
func SameFidelityResponses(a, b string) error {
	ra, err := rawFilesLike(a, "raw/*/shard-*.json")
	if err != nil {
		return err
	}
	rb, err := rawFilesLike(b, "raw/*/shard-*.json")
	if err != nil {
		return err
	}
	if len(ra) == 0 || !slices.Equal(ra, rb) {
		return fmt.Errorf("%s has shard records %v, %s has %v", a, ra, b, rb)
	}
	for _, rel := range ra {
		sa, err := ReadFidelityShard(filepath.Join(a, rel))
		if err != nil {
			return err
		}
		sb, err := ReadFidelityShard(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		for _, arm := range []struct {
			name string
			x, y []editions.IFEvalReply
		}{{"reference", sa.Reference.Responses, sb.Reference.Responses}, {"treatment", sa.Treatment.Responses, sb.Treatment.Responses}} {
			if len(arm.x) != len(arm.y) {
				return fmt.Errorf("%s %s: %d and %d responses", rel, arm.name, len(arm.x), len(arm.y))
			}
			for i := range arm.x {
				x, y := arm.x[i], arm.y[i]
				if x.Key != y.Key || !slices.Equal(x.PromptTokenIDs, y.PromptTokenIDs) || !slices.Equal(x.TokenIDs, y.TokenIDs) || x.Text != y.Text || x.Ending != y.Ending {
					return fmt.Errorf("%s %s key %d: responses differ", rel, arm.name, x.Key)
				}
			}
		}
		if len(sa.Forced) != len(sb.Forced) {
			return fmt.Errorf("%s: %d and %d forced prompts", rel, len(sa.Forced), len(sb.Forced))
		}
		for i := range sa.Forced {
			if !reflect.DeepEqual(sa.Forced[i].Positions, sb.Forced[i].Positions) {
				return fmt.Errorf("%s key %d: forced positions differ", rel, sa.Forced[i].Key)
			}
		}
	}
	return nil
}

package campaigns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// An IFEval campaign (contract IFEVAL-v1 or IFEVAL-SMOKE-v1) has the
// residency campaign's file format and runner mechanics (validation,
// prepared artifacts, one worker process per unit of work, the journal,
// resume, atomic publication), with a shard of the contract's prompts as
// the unit of work instead of a block: worker (configuration, shard k)
// generates prompts ShardRange(k) on one evolving cache and writes
// raw/<config>/shard-<k>.json. The edition's other documents come from
// report.WriteIFEvalEdition.

// ContractIDOf returns the contract id a campaign file names (the CLI
// dispatches on it); the campaign is parsed strictly, not validated.
func ContractIDOf(campaignPath string) (string, error) {
	c, err := LoadFile(campaignPath)
	if err != nil {
		return "", err
	}
	return c.Contract.ID, nil
}

// FrozenContractID returns the id of a frozen contract.json.
func FrozenContractID(contractPath string) (string, error) {
	var kd editions.ContractDoc
	if err := readJSONStrict(contractPath, &kd); err != nil {
		return "", err
	}
	return kd.ID, nil
}

// LoadIFEval reads an IFEval campaign and the built-in contract it names,
// and validates one against the other.
func LoadIFEval(campaignPath string, cat Catalog) (*Campaign, *contracts.IFEval, string, error) {
	c, err := LoadFile(campaignPath)
	if err != nil {
		return nil, nil, "", err
	}
	k, err := contracts.EmbeddedIFEval(c.Contract.ID)
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
	if _, err := report.IFEvalInputs(k); err != nil {
		return nil, nil, "", fmt.Errorf("campaign %s: %w", campaignPath, err)
	}
	if k.Scorer != ifeval.Rules.Version {
		return nil, nil, "", fmt.Errorf("campaign %s: %w: contract %s scores with %s, this build's scorer is %s", campaignPath, ErrInvalid, k.ID, k.Scorer, ifeval.Rules.Version)
	}
	return c, k, sum, nil
}

// IFEvalContractDoc freezes an IFEval contract for contract.json.
func IFEvalContractDoc(k *contracts.IFEval) (editions.ContractDoc, error) {
	b, err := k.JSON()
	if err != nil {
		return editions.ContractDoc{}, err
	}
	sum, err := k.SHA256()
	if err != nil {
		return editions.ContractDoc{}, err
	}
	return editions.ContractDoc{Schema: editions.SchemaIFEvalContract, Version: editions.Version, ID: k.ID, SHA256: sum, Contract: b}, nil
}

// LoadFrozenIFEval reads the frozen campaign and IFEval contract a runner
// wrote for its workers, checking both hashes.
func LoadFrozenIFEval(campaignPath, contractPath string) (*Campaign, *contracts.IFEval, string, error) {
	var kd editions.ContractDoc
	if err := readJSONStrict(contractPath, &kd); err != nil {
		return nil, nil, "", err
	}
	k, err := contracts.IFEvalFromJSON(kd.Contract)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", contractPath, err)
	}
	if sum, err := k.SHA256(); err != nil || sum != kd.SHA256 {
		return nil, nil, "", fmt.Errorf("%s: the contract's canonical hash is %s, the document says %s (%v)", contractPath, sum, kd.SHA256, err)
	}
	var cd editions.CampaignDoc
	if err := readJSONStrict(campaignPath, &cd); err != nil {
		return nil, nil, "", err
	}
	c, err := FromDoc(cd, "")
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", campaignPath, err)
	}
	if c.Contract.ID != k.ID || c.Contract.SHA256 != kd.SHA256 {
		return nil, nil, "", fmt.Errorf("%s runs contract %s %s, %s is %s %s", campaignPath, c.Contract.ID, c.Contract.SHA256, contractPath, k.ID, kd.SHA256)
	}
	return c, k, kd.SHA256, nil
}

// ReadIFEvalShard reads a shard record strictly.
func ReadIFEvalShard(path string) (*editions.IFEvalShard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s editions.IFEvalShard
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// RunIFEval runs an IFEval campaign end to end, as Run runs a residency
// campaign. o.Contract must be "" (IFEval contracts are built in).
func RunIFEval(ctx context.Context, o RunOptions) (RunResult, error) {
	start := time.Now()
	prog := o.Progress
	if prog == nil {
		prog = quiet{}
	}
	if o.Runtime == nil {
		return RunResult{}, errors.New("campaigns: RunOptions.Runtime is nil (pass worker.Runtime{})")
	}
	if o.Contract != "" {
		return RunResult{}, fmt.Errorf("%w: IFEval contracts are built in; --contract does not apply", ErrInvalid)
	}
	c, k, ksum, err := LoadIFEval(o.Campaign, o.Runtime)
	if err != nil {
		return RunResult{}, err
	}
	ins, err := report.IFEvalInputs(k)
	if err != nil {
		return RunResult{}, err
	}
	res := RunResult{Edition: c.Edition, Dir: o.Out}
	campDoc, err := c.Doc()
	if err != nil {
		return res, err
	}
	contractDoc, err := IFEvalContractDoc(k)
	if err != nil {
		return res, err
	}
	rs, err := setupRun(ctx, o, c, &res, campDoc, contractDoc, ReportTo(prog))
	if err != nil {
		return res, err
	}
	defer rs.unlock()
	runDir, j, artSHA := rs.runDir, rs.j, rs.artSHA
	shards := k.Shards()
	if rs.left > 0 {
		res.Workers = len(c.Configurations) * shards
		return res, &StoppedError{RunDir: runDir, Workers: res.Workers, Remaining: res.Workers, Artifacts: rs.left}
	}
	check := func(w worker) (*editions.IFEvalShard, error) {
		s, err := ReadIFEvalShard(filepath.Join(runDir, w.rel))
		if err != nil {
			return nil, err
		}
		return s, report.CheckIFEvalShard(k, ksum, ins, w.cfg.ID, w.block, s)
	}
	var plan, todo []worker
	var todoPrompts int64
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		for s := 1; s <= shards; s++ {
			w := worker{cfg: cfg, cfgIndex: i, block: s, rel: filepath.FromSlash(editions.IFEvalShardPath(cfg.ID, s))}
			if w.key, err = workKey(c, cfg, s, artSHA[cfg.ID], o.Build); err != nil {
				return res, err
			}
			plan = append(plan, w)
			if _, err := check(w); !j.finished(runDir, w.key, w.rel) || err != nil {
				todo = append(todo, w)
				lo, hi := k.ShardRange(s)
				todoPrompts += int64(hi - lo)
			}
		}
	}
	res.Workers = len(plan)
	// The token total is an upper bound (every response at max_new_tokens):
	// a response that ends at EOS ends early.
	if sp, ok := prog.(ShardProgress); ok {
		sp.Shards()
	}
	prog.Start(len(c.Configurations), len(plan), len(plan)-len(todo), todoPrompts*int64(k.MaxNewTokens))
	ran, err := rs.runTodo(ctx, o, prog, c, plan, todo, "shard", shards, func(w worker) error {
		_, err := check(w)
		return err
	})
	res.Ran = ran
	if err != nil {
		return res, err
	}
	records := map[string][]*editions.IFEvalShard{}
	for _, w := range plan {
		if !j.finished(runDir, w.key, w.rel) {
			return res, fmt.Errorf("record %s changed after it was journaled; run again to redo it", w.rel)
		}
		s, err := check(w)
		if err != nil {
			return res, err
		}
		records[w.cfg.ID] = append(records[w.cfg.ID], s)
	}
	prog.Say("scoring and writing the edition")
	in := report.IFEvalInput{CampaignDoc: campDoc, ContractDoc: contractDoc, Shards: records, RunDir: runDir}
	if err := publish(res.Dir, o.Force, func(dir string) error { return report.WriteIFEvalEdition(dir, in) }); err != nil {
		return res, err
	}
	if err := clearRun(runDir); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// SameIFEvalResponses checks that two IFEval editions hold the same shard
// records with the same prompts, token ids, texts and endings (a rerun of
// a campaign on the same build and checkpoints must give them).
func SameIFEvalResponses(a, b string) error {
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
		sa, err := ReadIFEvalShard(filepath.Join(a, rel))
		if err != nil {
			return err
		}
		sb, err := ReadIFEvalShard(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if len(sa.Responses) != len(sb.Responses) {
			return fmt.Errorf("%s: %d and %d responses", rel, len(sa.Responses), len(sb.Responses))
		}
		for i := range sa.Responses {
			x, y := sa.Responses[i], sb.Responses[i]
			switch {
			case x.Key != y.Key || !slices.Equal(x.PromptTokenIDs, y.PromptTokenIDs):
				return fmt.Errorf("%s response %d: prompts differ (keys %d, %d)", rel, i, x.Key, y.Key)
			case !slices.Equal(x.TokenIDs, y.TokenIDs) || x.Text != y.Text || x.Ending != y.Ending:
				return fmt.Errorf("%s key %d: responses differ", rel, x.Key)
			}
		}
	}
	return nil
}

package campaigns

import (
	"context"
	"errors"
	"fmt"
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
	return builtinContractDoc(k, editions.SchemaIFEvalContract)
}

// LoadFrozenIFEval reads the frozen campaign and IFEval contract a runner
// wrote for its workers, checking both hashes.
func LoadFrozenIFEval(campaignPath, contractPath string) (*Campaign, *contracts.IFEval, string, error) {
	return loadFrozenBuiltin(campaignPath, contractPath, contracts.IFEvalFromJSON)
}

// ReadIFEvalShard reads a shard record strictly.
func ReadIFEvalShard(path string) (*editions.IFEvalShard, error) {
	return readShard[editions.IFEvalShard](path)
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
	runDir, artSHA := rs.runDir, rs.artSHA
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
	var plan []worker
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		for s := 1; s <= shards; s++ {
			w := worker{cfg: cfg, cfgIndex: i, block: s, rel: filepath.FromSlash(editions.IFEvalShardPath(cfg.ID, s))}
			if w.key, err = workKey(c, cfg, s, artSHA[cfg.ID], o.Build); err != nil {
				return res, err
			}
			plan = append(plan, w)
		}
	}
	err = shardRun[editions.IFEvalShard]{
		plan:  plan,
		check: check,
		prompts: func(w worker) int64 {
			lo, hi := k.ShardRange(w.block)
			return int64(hi - lo)
		},
		// An upper bound: a response that ends at EOS ends early.
		tokens: int64(k.MaxNewTokens),
		arms:   len(c.Configurations),
		say:    "scoring and writing the edition",
		write: func(dir string, records map[string][]*editions.IFEvalShard) error {
			return report.WriteIFEvalEdition(dir, report.IFEvalInput{CampaignDoc: campDoc, ContractDoc: contractDoc, Shards: records, RunDir: runDir})
		},
	}.run(ctx, o, prog, c, rs, &res, shards)
	if err != nil {
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

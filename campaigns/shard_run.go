package campaigns

import (
	"context"
	"fmt"

	"github.com/horizon-runmap/horizon/editions"
)

// What the two shard-unit runs (RunIFEval and RunFidelity) share: their
// contracts are built in and frozen alike, their records are shard files
// read strictly, and after setupRun both plan one worker per (arm, shard),
// run what the journal lacks, check every record again and publish.

// builtinContract is a built-in contract as a shard-unit campaign freezes
// it (contracts.IFEval, contracts.Fidelity).
type builtinContract interface {
	ContractID() string
	JSON() ([]byte, error)
	SHA256() (string, error)
}

// builtinContractDoc freezes k for contract.json under schema.
func builtinContractDoc(k builtinContract, schema string) (editions.ContractDoc, error) {
	b, err := k.JSON()
	if err != nil {
		return editions.ContractDoc{}, err
	}
	sum, err := k.SHA256()
	if err != nil {
		return editions.ContractDoc{}, err
	}
	return editions.ContractDoc{Schema: schema, Version: editions.Version, ID: k.ContractID(), SHA256: sum, Contract: b}, nil
}

// loadFrozenBuiltin reads the frozen campaign and built-in contract a
// runner wrote for its workers (parse decodes the contract), checking the
// contract's canonical hash and that the campaign runs that contract.
func loadFrozenBuiltin[K builtinContract](campaignPath, contractPath string, parse func([]byte) (K, error)) (*Campaign, K, string, error) {
	var zero K
	var kd editions.ContractDoc
	if err := readJSONStrict(contractPath, &kd); err != nil {
		return nil, zero, "", err
	}
	k, err := parse(kd.Contract)
	if err != nil {
		return nil, zero, "", fmt.Errorf("%s: %w", contractPath, err)
	}
	if sum, err := k.SHA256(); err != nil || sum != kd.SHA256 {
		return nil, zero, "", fmt.Errorf("%s: the contract's canonical hash is %s, the document says %s (%v)", contractPath, sum, kd.SHA256, err)
	}
	var cd editions.CampaignDoc
	if err := readJSONStrict(campaignPath, &cd); err != nil {
		return nil, zero, "", err
	}
	c, err := FromDoc(cd, "")
	if err != nil {
		return nil, zero, "", fmt.Errorf("%s: %w", campaignPath, err)
	}
	if c.Contract.ID != k.ContractID() || c.Contract.SHA256 != kd.SHA256 {
		return nil, zero, "", fmt.Errorf("%s runs contract %s %s, %s is %s %s", campaignPath, c.Contract.ID, c.Contract.SHA256, contractPath, k.ContractID(), kd.SHA256)
	}
	return c, k, kd.SHA256, nil
}

// readShard reads a shard record strictly (unknown fields refused).
func readShard[S any](path string) (*S, error) {
	var s S
	if err := readJSONStrict(path, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// shardRun is a shard-unit run after setupRun and its plan.
type shardRun[S any] struct {
	plan    []worker
	check   func(worker) (*S, error) // reads a worker's record and checks it against the contract
	prompts func(worker) int64       // the prompts a worker generates
	// tokens bounds the tokens a prompt generates (every response at
	// max_new_tokens, times the generations a prompt takes).
	tokens int64
	arms   int    // what the progress counts as configurations
	say    string // the line before the edition is written
	write  func(dir string, records map[string][]*S) error
}

// run runs the plan's workers the journal has not finished (or whose record
// no longer checks), then checks every record again, groups them by
// configuration in plan order, publishes the edition with write and clears
// the run directory.
func (p shardRun[S]) run(ctx context.Context, o RunOptions, prog Progress, c *Campaign, rs *runState, res *RunResult, shards int) error {
	var todo []worker
	var todoPrompts int64
	for _, w := range p.plan {
		if _, err := p.check(w); !rs.j.finished(rs.runDir, w.key, w.rel) || err != nil {
			todo = append(todo, w)
			todoPrompts += p.prompts(w)
		}
	}
	res.Workers = len(p.plan)
	if sp, ok := prog.(ShardProgress); ok {
		sp.Shards()
	}
	prog.Start(p.arms, len(p.plan), len(p.plan)-len(todo), todoPrompts*p.tokens)
	ran, err := rs.runTodo(ctx, o, prog, c, p.plan, todo, "shard", shards, func(w worker) error {
		_, err := p.check(w)
		return err
	})
	res.Ran = ran
	if err != nil {
		return err
	}
	records := map[string][]*S{}
	for _, w := range p.plan {
		if !rs.j.finished(rs.runDir, w.key, w.rel) {
			return fmt.Errorf("record %s changed after it was journaled; run again to redo it", w.rel)
		}
		s, err := p.check(w)
		if err != nil {
			return err
		}
		records[w.cfg.ID] = append(records[w.cfg.ID], s)
	}
	prog.Say(p.say)
	if err := publish(res.Dir, o.Force, func(dir string) error { return p.write(dir, records) }); err != nil {
		return err
	}
	return clearRun(rs.runDir)
}

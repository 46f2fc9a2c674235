package campaigns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// ErrReproduceUsage marks a reproduction that cannot start as asked: the
// edition is not an intact edition, a configuration or block it does not
// have was chosen, or the destination holds something that is not a
// reproduction directory. Nothing was written.
var ErrReproduceUsage = errors.New("cannot reproduce")

// ReproduceOptions configure Reproduce.
type ReproduceOptions struct {
	Edition string   // the edition directory
	Configs []string // configuration ids to rerun; nil: all, in campaign order
	Blocks  []int    // blocks to rerun of each; nil: all
	Out     string   // the reproduction directory (outside the edition)
	// RunDir holds the prepared artifacts and the frozen campaign and
	// contract the workers read; "" means Out/run.
	RunDir string
	// ArtifactCache, as in RunOptions, shares prepared artifacts between
	// run directories.
	ArtifactCache string
	// CampaignDir resolves the frozen campaign's relative hf.dir paths,
	// which were relative to the campaign file; "" means "campaigns", where
	// the committed campaign files live.
	CampaignDir string
	// Force replaces a previous reproduction directory (never anything
	// else).
	Force bool
	// SpeedTolerance declares the speed ratio's tolerance; 0 means
	// editions.DefaultSpeedTolerance.
	SpeedTolerance float64
	// CheckDevice, when set, is asked whether this machine can run the
	// edition's device ("cpu", "cuda") before anything is prepared; its
	// error refuses the reproduction (ErrReproduceUsage).
	CheckDevice func(device string) error
	Launch      WorkerLauncher
	// Runtime prepares the artifacts (worker.Runtime); required.
	Runtime  Runtime
	Progress Progress // nil is quiet
	Now      func() time.Time
}

// ReproduceResult is a finished reproduction. Doc.Identical says whether
// every worker's prompts, tokens and counters were identical; a reproduction
// that differs is still written (it is the evidence of the difference).
type ReproduceResult struct {
	Dir string
	Doc editions.ReproductionDoc
}

// reproPlan is what a reproduction will do, decided before anything is
// written.
type reproPlan struct {
	campaign    *Campaign
	contract    *contracts.Contract
	manifest    editions.Manifest
	manifestSHA string
	listed      map[string]editions.FileEntry // the edition's files by path
	configs     []*Configuration
	blocks      []int
	replace     bool // Out exists (an empty directory, or a reproduction with Force)
}

// Reproduce reruns chosen workers of an edition from the edition's own
// frozen campaign and contract, on this machine, and writes a reproduction
// directory (see editions.ReproductionDoc): the artifacts are prepared as a
// run prepares them, the workers are launched exactly as a run launches
// them (o.Launch), and each rerun record is checked against the contract
// before it is compared. The directory is assembled beside Out and renamed
// into place only when complete.
func Reproduce(ctx context.Context, o ReproduceOptions) (ReproduceResult, error) {
	if o.SpeedTolerance == 0 {
		o.SpeedTolerance = editions.DefaultSpeedTolerance
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress == nil {
		o.Progress = quiet{}
	}
	res := ReproduceResult{Dir: o.Out}
	if o.Runtime == nil {
		return res, errors.New("campaigns: ReproduceOptions.Runtime is nil (pass worker.Runtime{})")
	}
	if !(o.SpeedTolerance > 0 && o.SpeedTolerance < 1) {
		return res, fmt.Errorf("%w: speed tolerance %v is not in (0, 1)", ErrReproduceUsage, o.SpeedTolerance)
	}
	p, err := planReproduction(o)
	if err != nil {
		return res, err
	}
	if err := removeStaleStaging(o.Out); err != nil {
		return res, err
	}
	err = publish(o.Out, p.replace, func(dir string) error {
		d, err := reproduceInto(ctx, o, p, dir)
		res.Doc = d
		if err != nil {
			return err
		}
		// The destination may have changed while the workers ran.
		if _, err := checkReproDest(o.Out, o.Force); err != nil {
			return err
		}
		return nil
	})
	return res, err
}

// planReproduction checks the edition, the choice of workers and the
// destination.
func planReproduction(o ReproduceOptions) (*reproPlan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrReproduceUsage, fmt.Sprintf(format, args...))
	}
	if o.Edition == "" || o.Out == "" {
		return nil, bad("give the edition and --out DIR")
	}
	p := &reproPlan{listed: map[string]editions.FileEntry{}}
	mpath := filepath.Join(o.Edition, editions.ManifestFile)
	if err := readJSONStrict(mpath, &p.manifest); err != nil {
		return nil, bad("%s is not an edition: %v", o.Edition, err)
	}
	if p.manifest.Schema != editions.SchemaManifest || p.manifest.Edition == "" {
		return nil, bad("%s is not an edition: %s is not a horizon manifest", o.Edition, mpath)
	}
	if err := editions.CheckManifest(o.Edition, p.manifest); err != nil {
		return nil, bad("%s does not match its manifest (run horizon-verify on it): %v", o.Edition, err)
	}
	var err error
	if p.manifestSHA, _, err = editions.HashFile(mpath); err != nil {
		return nil, err
	}
	for _, f := range p.manifest.Files {
		p.listed[f.Path] = f
	}
	c, k, _, err := LoadFrozen(filepath.Join(o.Edition, editions.CampaignFile), filepath.Join(o.Edition, editions.ContractFile))
	if err != nil {
		return nil, bad("%s: its frozen campaign and contract do not load: %v", o.Edition, err)
	}
	if c.Edition != p.manifest.Edition {
		return nil, bad("%s: the campaign is for edition %s, the manifest says %s", o.Edition, c.Edition, p.manifest.Edition)
	}
	if o.CheckDevice != nil {
		if err := o.CheckDevice(c.Device); err != nil {
			return nil, bad("%s: %v", o.Edition, err)
		}
	}
	c.dir = o.CampaignDir
	if c.dir == "" {
		c.dir = "campaigns"
	}
	p.campaign, p.contract = c, k

	if len(o.Configs) == 0 {
		for i := range c.Configurations {
			p.configs = append(p.configs, &c.Configurations[i])
		}
	} else {
		var ids []string
		for i := range c.Configurations {
			ids = append(ids, c.Configurations[i].ID)
		}
		for i := range c.Configurations {
			if slices.Contains(o.Configs, c.Configurations[i].ID) {
				p.configs = append(p.configs, &c.Configurations[i])
			}
		}
		for _, id := range o.Configs {
			if !slices.Contains(ids, id) {
				return nil, bad("edition %s has no configuration %q (it has %s)", c.Edition, id, strings.Join(ids, ", "))
			}
		}
	}
	if len(o.Blocks) == 0 {
		for b := 1; b <= k.Blocks; b++ {
			p.blocks = append(p.blocks, b)
		}
	} else {
		for _, b := range o.Blocks {
			if b < 1 || b > k.Blocks {
				return nil, bad("block %d: contract %s has blocks 1..%d", b, k.ID, k.Blocks)
			}
			if !slices.Contains(p.blocks, b) {
				p.blocks = append(p.blocks, b)
			}
		}
		sort.Ints(p.blocks)
	}
	for _, cfg := range p.configs {
		for _, b := range p.blocks {
			if _, ok := p.listed[editions.RawPath(cfg.ID, b)]; !ok {
				return nil, bad("edition %s lists no raw record %s", c.Edition, editions.RawPath(cfg.ID, b))
			}
		}
	}

	// The destination: outside the edition, and never anything but a
	// reproduction directory.
	ed, err1 := filepath.Abs(o.Edition)
	out, err2 := filepath.Abs(o.Out)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	if within(out, ed) || within(ed, out) {
		return nil, bad("--out %s and the edition %s overlap; write the reproduction outside the edition", o.Out, o.Edition)
	}
	if p.replace, err = checkReproDest(o.Out, o.Force); err != nil {
		return nil, err
	}
	return p, nil
}

// within reports whether path is dir or inside it (both absolute, clean).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// checkReproDest decides whether a reproduction may be published at dest:
// absent is free; an empty directory is replaced; a previous reproduction
// directory (holding a horizon.reproduction reproduction.json) only with
// force; anything else is refused with what it holds, and left alone.
func checkReproDest(dest string, force bool) (replace bool, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: --out %s %s", ErrReproduceUsage, dest, fmt.Sprintf(format, args...))
	}
	st, err := os.Lstat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, bad("cannot be inspected: %v", err)
	case st.Mode()&fs.ModeSymlink != 0:
		return false, bad("is a symlink; nothing was written")
	case !st.IsDir():
		return false, bad("is a file of %d bytes, not a reproduction directory; nothing was written", st.Size())
	}
	ents, err := os.ReadDir(dest)
	if err != nil {
		return false, bad("cannot be read: %v", err)
	}
	if len(ents) == 0 {
		return true, nil
	}
	b, err := os.ReadFile(filepath.Join(dest, editions.ReproductionFile))
	var head struct {
		Schema string `json:"schema"`
	}
	if err != nil || json.Unmarshal(b, &head) != nil || head.Schema != editions.SchemaReproduction {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) > 8 {
			names = append(names[:8], fmt.Sprintf("... (%d entries)", len(ents)))
		}
		return false, bad("holds %s and is not a reproduction directory (no horizon.reproduction %s); nothing was written, choose another --out",
			strings.Join(names, ", "), editions.ReproductionFile)
	}
	if !force {
		return false, bad("holds a previous reproduction; pass --force to replace it")
	}
	return true, nil
}

// removeStaleStaging removes what a killed reproduction left beside dest.
func removeStaleStaging(dest string) error {
	parent, base := filepath.Dir(dest), filepath.Base(dest)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil // absent parent: nothing stale; publish creates it
	}
	var stale []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+base+stagingInfix) {
			stale = append(stale, filepath.Join(parent, e.Name()))
		}
	}
	return removeAll(stale)
}

// reproduceInto runs the planned workers and writes the reproduction
// directory's contents into dir (the staging directory).
func reproduceInto(ctx context.Context, o ReproduceOptions, p *reproPlan, dir string) (editions.ReproductionDoc, error) {
	c, k, prog := p.campaign, p.contract, o.Progress
	runDir := o.RunDir
	if runDir == "" {
		runDir = filepath.Join(dir, editions.ReproRunDir)
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return editions.ReproductionDoc{}, err
	}
	unlock, err := lockRunDir(ctx, runDir)
	if err != nil {
		return editions.ReproductionDoc{}, err
	}
	defer unlock()
	stale, err := staleUnder(runDir)
	if err == nil {
		err = removeAll(stale)
	}
	if err != nil {
		return editions.ReproductionDoc{}, err
	}
	// The workers read the edition's frozen campaign and contract, byte for
	// byte.
	campPath, contractPath := filepath.Join(runDir, editions.CampaignFile), filepath.Join(runDir, editions.ContractFile)
	for src, dst := range map[string]string{editions.CampaignFile: campPath, editions.ContractFile: contractPath} {
		if err := copyChecked(filepath.Join(o.Edition, src), dst, p.listed[src].SHA256); err != nil {
			return editions.ReproductionDoc{}, err
		}
	}
	defer os.Remove(campPath)
	defer os.Remove(contractPath)

	sub := *c
	sub.Configurations = nil
	for _, cfg := range p.configs {
		sub.Configurations = append(sub.Configurations, *cfg)
	}
	arts, _, err := prepareAll(ctx, o.Runtime, &sub, runDir, o.ArtifactCache, nil, ReportTo(prog))
	if err != nil {
		return editions.ReproductionDoc{}, err
	}

	workers := len(p.configs) * len(p.blocks)
	var total int64 // measured (or prompt) tokens; the display counts warmups apart
	for _, cfg := range p.configs {
		total += int64(len(p.blocks)) * progressTokens(k, o.Runtime, &sub, cfg)
	}
	startPrompts(prog, k)
	prog.Start(len(p.configs), workers, 0, total)
	var pairs []ReproPair
	n := 0
	for ci, cfg := range p.configs {
		for _, b := range p.blocks {
			n++
			prog.Worker(n, workers, ci+1, len(p.configs), cfg.ID, b, k.Blocks)
			pair, err := reproduceWorker(ctx, o, p, dir, campPath, contractPath, arts[cfg.ID], cfg, b)
			if err != nil {
				prog.Done()
				return editions.ReproductionDoc{}, err
			}
			pairs = append(pairs, pair)
		}
	}
	prog.Done()
	d, err := Reproduction(c.Edition, p.manifestSHA, o.Now().UTC().Format(time.RFC3339), o.SpeedTolerance, k, pairs)
	if err != nil {
		return d, err
	}
	return d, editions.WriteDoc(filepath.Join(dir, editions.ReproductionFile), &d)
}

// reproduceWorker reruns one worker into dir/rerun/ and copies the
// edition's record of it into dir/original/.
func reproduceWorker(ctx context.Context, o ReproduceOptions, p *reproPlan, dir, campPath, contractPath, artifact string,
	cfg *Configuration, block int) (ReproPair, error) {
	var pair ReproPair
	name := editions.ReproWorkerName(cfg.ID, block)
	raw := editions.RawPath(cfg.ID, block)
	origRel, rerunRel := editions.ReproOriginalPath(cfg.ID, block), editions.ReproRerunPath(cfg.ID, block)
	origPath, rerunPath := filepath.Join(dir, filepath.FromSlash(origRel)), filepath.Join(dir, filepath.FromSlash(rerunRel))
	if err := copyChecked(filepath.Join(o.Edition, filepath.FromSlash(raw)), origPath, p.listed[raw].SHA256); err != nil {
		return pair, err
	}
	var err error
	if pair.Original, err = readRecord(origPath); err != nil {
		return pair, err
	}
	// The rerun prefills as the original did: a configuration that leaves
	// prefill auto may have run it otherwise under the original's build
	// (editions.RawVersionBatchedAuto).
	args := WorkerArgs{Campaign: campPath, Contract: contractPath, Config: cfg.ID, Block: block, Artifact: artifact, Out: rerunPath,
		Prefill: rerunPrefill(cfg, pair.Original)}
	if err := runWorker(ctx, o.Launch, args, o.Progress); err != nil {
		return pair, fmt.Errorf("worker %s: %w", name, err)
	}
	if pair.Rerun, err = readRecord(rerunPath); err != nil {
		return pair, err
	}
	if err := CheckRecord(p.contract, p.campaign, cfg, block, pair.Rerun); err != nil {
		return pair, fmt.Errorf("rerun worker %s: %w", name, err)
	}
	for _, f := range []struct {
		rel, path string
		out       *editions.ReproFile
	}{{origRel, origPath, &pair.OriginalFile}, {rerunRel, rerunPath, &pair.RerunFile}} {
		sum, size, err := editions.HashFile(f.path)
		if err != nil {
			return pair, err
		}
		*f.out = editions.ReproFile{Path: f.rel, Bytes: size, SHA256: sum}
	}
	if pair.Original.Artifact.SHA256 != pair.Rerun.Artifact.SHA256 {
		o.Progress.Say(fmt.Sprintf("%s: the prepared artifact %s is not the edition's %s; tokens may differ",
			name, pair.Rerun.Artifact.SHA256, pair.Original.Artifact.SHA256))
	}
	return pair, nil
}

// rerunPrefill is the prefill a rerun of orig pins (WorkerArgs.Prefill)
// where the configuration leaves prefill auto: the original record's, and
// token at a time for a record from before the field (which is what it
// means, editions.Setup.Prefill); "" (the configuration's own) where the
// configuration declares its prefill.
func rerunPrefill(cfg *Configuration, orig *editions.RawRecord) string {
	if cfg.Prefill != "" && cfg.Prefill != PrefillAuto {
		return ""
	}
	if orig.Setup.Prefill == "" {
		return PrefillToken
	}
	return orig.Setup.Prefill
}

// copyChecked copies src to dst (atomically) after checking that its
// SHA-256 is want: a file of the edition that changed since the manifest
// was written is not copied as the edition's.
func copyChecked(src, dst, want string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%s has sha256 %s, the edition's manifest lists %s", src, got, want)
	}
	return editions.WriteFileAtomic(dst, b)
}

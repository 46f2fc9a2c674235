package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// TestRunIFEvalChatTemplate: a checkpoint whose tokenizer_config.json has
// a chat template gets its prompts rendered through it (prompt format
// chat_template, the template's hash recorded, the prompt ids those of the
// rendered text), and the shard record passes the contract's checks.
func TestRunIFEvalChatTemplate(t *testing.T) {
	dir := t.TempDir()
	ckpt, art := filepath.Join(dir, "ckpt"), filepath.Join(dir, "art")
	if _, err := model.Synthesize(model.SynthOptions{Arch: "olmoe-tiny", Seed: 1, OutDir: ckpt}); err != nil {
		t.Fatal(err)
	}
	const tmpl = `{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}`
	cfgJSON := `{"chat_template": "` + tmpl + `", "eos_token": "<|endoftext|>"}` // \n: JSON newlines
	if err := os.WriteFile(filepath.Join(ckpt, "tokenizer_config.json"), []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: art}); err != nil {
		t.Fatal(err)
	}
	k, err := contracts.EmbeddedIFEval(contracts.IFEvalSmokeV1)
	if err != nil {
		t.Fatal(err)
	}
	k.MaxNewTokens, k.ShardPrompts = 4, 3 // a short test: shard 1 is the first 3 prompts
	sum, err := k.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	c, err := campaigns.Parse([]byte(`edition: t
description: chat template test
contract: {id: IFEVAL-SMOKE-v1, sha256: `+sum+`}
device: cpu
threads: 1
configurations:
  - id: tiny
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 1}}
    capacity: 16
    executor: grouped-v1
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(k, sum, worker.Runtime{}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := c.Config("tiny")
	be := cpu.New(1)
	out := filepath.Join(dir, "shard-1.json")
	if err := worker.RunIFEval(worker.IFEvalOptions{Contract: k, ContractSHA: sum, Campaign: c, Config: cfg, Shard: 1,
		ArtifactDir: art, Out: out, Device: worker.Device{Name: "cpu", Backend: be, Rows: cache.NewCPUDevice(be), Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	s, err := campaigns.ReadIFEvalShard(out)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := tokenizer.LoadChatTemplate(art)
	if err != nil || ct == nil {
		t.Fatalf("the artifact's chat template: %v %v", ct, err)
	}
	if s.Setup.PromptFormat != contracts.FormatChatTemplate || s.Setup.ChatTemplateSHA256 != ct.SHA256() {
		t.Fatalf("prompt format %s, template %s; want chat_template, %s", s.Setup.PromptFormat, s.Setup.ChatTemplateSHA256, ct.SHA256())
	}
	if len(s.Responses) != 3 {
		t.Fatalf("%d responses, want 3", len(s.Responses))
	}
	// the byte-level tokenizer: the prompt ids are the rendered text's bytes
	got := make([]byte, len(s.Responses[0].PromptTokenIDs))
	for i, id := range s.Responses[0].PromptTokenIDs {
		got[i] = byte(id)
	}
	if !strings.HasPrefix(string(got), "<|user|>\nWrite a 300+ word summary") || !strings.HasSuffix(string(got), "\n<|assistant|>\n") {
		t.Fatalf("prompt as the model saw it: %q", got)
	}
}

// Package report turns an edition's raw worker records into the rest of the
// edition: one aggregate per configuration (Aggregate), the claims (Claims),
// the plots and the two reports, report.md and report.html, and the
// manifest (WriteEdition).
//
// It works from edition documents only (editions.CampaignDoc, ContractDoc,
// RawRecord) and imports editions and contracts, never the runner
// (package campaigns) or runtime/: what an edition says must follow from
// its files, so the code that writes it must not need anything else. Its
// one runtime-derived part, the ceilings section of cuda reports, comes in
// as a function (EditionInput.Ceilings).
//
// Both reports render one Report value through a Reporter (vegeta style:
// one small function per format), and their tables come from one field
// list (fields.go), so the formats cannot disagree.
package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Campaign is what the report side reads of a campaign: its identity and
// the status of its claims, and its configurations in campaign order. It is
// decoded from the frozen campaign document (CampaignFromDoc), so the
// report side needs no campaign definition, validation or runtime.
type Campaign struct {
	Edition     string `json:"edition"`
	Description string `json:"description"`
	Device      string `json:"device"`
	// Evidence and Publication are the status of every claim.
	Evidence       string          `json:"evidence"`
	Publication    string          `json:"publication"`
	Configurations []Configuration `json:"configurations"`
}

// Configuration is what the report side reads of one configuration; the
// rest of what it shows comes from the raw records.
type Configuration struct {
	ID string `json:"id"`
	// SeedExecutor is the seed campaign's executor name, shown beside ours.
	SeedExecutor string `json:"seed_executor"`
	// The declared modes, where the campaign declares them: the plots draw
	// configurations that differ in one as separate series.
	Transport string `json:"transport"`
	Prefetch  string `json:"prefetch"`
	Overlap   string `json:"overlap"`
	StepMode  string `json:"step_mode"`
	Prefill   string `json:"prefill"`
	KV        string `json:"kv"`
	// ExpertActivations is the routed experts' declared activation dtype
	// in a batched prefill (fp32, the default, or fp16).
	ExpertActivations string `json:"expert_activations"`
	// DenseActivations is the dense projections' declared activation
	// dtype in a batched prefill (fp32, the default, or fp16).
	DenseActivations string `json:"dense_activations"`
	// ExpertFormat tells a fidelity edition's arms apart.
	ExpertFormat string `json:"expert_format"`
}

// variant names what sets a configuration apart from the defaults (a
// transport other than staged, prefetch or overlap on, a declared step or
// prefill mode, a KV cache other than fp32, expert or dense activations
// other than fp32), "" when nothing does.
func (cfg Configuration) variant() string {
	var parts []string
	for _, x := range [][2]string{{cfg.Transport, "staged"}, {cfg.Prefetch, "off"}, {cfg.Overlap, "off"}, {cfg.StepMode, "auto"}, {cfg.Prefill, "auto"}, {cfg.KV, "fp32"}} {
		if x[0] != "" && x[0] != x[1] {
			parts = append(parts, x[0])
		}
	}
	// Named, as a bare fp16 would read as the KV cache's.
	if a := cfg.ExpertActivations; a != "" && a != "fp32" {
		parts = append(parts, "expert activations "+a)
	}
	if a := cfg.DenseActivations; a != "" && a != "fp32" {
		parts = append(parts, "dense activations "+a)
	}
	return strings.Join(parts, ", ")
}

// CampaignFromDoc decodes the report's view of a frozen campaign. Fields it
// does not show are ignored: the frozen document's hash and strict shape
// are the runner's and the verifier's to check.
func CampaignFromDoc(doc editions.CampaignDoc) (*Campaign, error) {
	var c Campaign
	if err := json.Unmarshal(doc.Campaign, &c); err != nil {
		return nil, fmt.Errorf("frozen campaign: %w", err)
	}
	return &c, nil
}

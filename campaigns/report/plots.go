package report

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/horizon-runmap/horizon/editions"
)

// figure is one metric plotted against capacity, one line per model
// (checkpoint) and executor.
type figure struct {
	name  string // file name without extension
	title string
	y     string // axis label
	value func(d *editions.ConfigDoc) (float64, bool)
	// absent explains a figure with no observed point.
	absent string
	// legendRight puts the legend top right (lines that fall with
	// capacity).
	legendRight bool
}

var figures = []figure{
	{name: "decode_tok_s", title: "Pooled decode rate against capacity", y: "pooled decode (tokens/s)",
		value: func(d *editions.ConfigDoc) (float64, bool) { return d.Metrics.PooledDecodeTokS, true }},
	{name: "vram_peak", title: "Whole-worker VRAM peak against capacity", y: "VRAM peak (GiB)",
		value: func(d *editions.ConfigDoc) (float64, bool) {
			o := d.Metrics.VRAMPeakBytes
			return float64(o.Value) / gib, o.Ok()
		},
		absent: "no configuration observed VRAM (UNSUPPORTED on the cpu device)"},
	{name: "h2d_bytes", title: "H2D expert bytes over the measured requests against capacity", y: "H2D (MiB)",
		value: func(d *editions.ConfigDoc) (float64, bool) { return float64(d.Metrics.H2DBytes) / mib, true }},
}

// missesFigure is the routing figure of an edition with traces: for each
// model, its measured requests' misses replayed under every policy
// (editionRouting); it is not drawn for an edition without traces.
var missesFigure = figure{name: "misses_by_policy", title: "Replayed misses of the measured requests against capacity, per policy",
	y: "misses (measured requests)", legendRight: true}

// series groups configurations by model and executor.
type series struct {
	label string
	pts   plotter.XYs
}

// writePlots renders the figures as PNGs under dir/plots and returns them
// for the reports, in figure order, then the misses figure when the
// edition has routing traces.
func writePlots(dir string, docs []editions.ConfigDoc, routing []modelRouting) ([]FigureRef, error) {
	var out []FigureRef
	emit := func(f figure, ss []*series) error {
		b, err := renderFigure(f, ss)
		if err != nil {
			return fmt.Errorf("plot %s: %w", f.name, err)
		}
		rel := "plots/" + f.name + ".png"
		if err := editions.WriteFileAtomic(filepath.Join(dir, filepath.FromSlash(rel)), b); err != nil {
			return err
		}
		out = append(out, FigureRef{Title: f.title, File: rel})
		return nil
	}
	for _, f := range figures {
		var ss []*series
		for i := range docs {
			d := &docs[i]
			v, ok := f.value(d)
			if !ok {
				continue
			}
			label := fmt.Sprintf("%s, %s", CheckpointLabel(d.Checkpoint), d.Executor)
			j := slices.IndexFunc(ss, func(s *series) bool { return s.label == label })
			if j < 0 {
				ss = append(ss, &series{label: label})
				j = len(ss) - 1
			}
			ss[j].pts = append(ss[j].pts, plotter.XY{X: float64(d.Capacity), Y: v})
		}
		if len(ss) == 0 {
			out = append(out, FigureRef{Title: f.title, Note: f.absent})
			continue
		}
		if err := emit(f, ss); err != nil {
			return nil, err
		}
	}
	if len(routing) > 0 {
		if err := emit(missesFigure, missesSeries(routing)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// missesSeries is one line per model and policy: misses against capacity,
// labelled by the configuration whose traces were replayed.
func missesSeries(routing []modelRouting) []*series {
	var ss []*series
	for i := range routing {
		mr := &routing[i]
		for _, c := range mr.curves {
			s := &series{label: fmt.Sprintf("%s, %s", mr.replay, c.policy)}
			for j, capacity := range mr.caps {
				s.pts = append(s.pts, plotter.XY{X: float64(capacity), Y: float64(c.misses[j])})
			}
			ss = append(ss, s)
		}
	}
	return ss
}

func renderFigure(f figure, ss []*series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = f.title
	p.X.Label.Text = "capacity (published experts per routed layer)"
	p.Y.Label.Text = f.y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = !f.legendRight
	p.Add(plotter.NewGrid())
	for i, s := range ss {
		slices.SortFunc(s.pts, func(a, b plotter.XY) int {
			switch {
			case a.X < b.X:
				return -1
			case a.X > b.X:
				return 1
			}
			return 0
		})
		l, pts, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(3)
		p.Add(l, pts)
		p.Legend.Add(s.label, l, pts)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2)
	p.Y.Max *= 1.25 // room for the legend above the lines
	pad := math.Max(1, (p.X.Max-p.X.Min)*0.05)
	p.X.Min, p.X.Max = p.X.Min-pad, p.X.Max+pad
	p.Y.Tick.Marker = plainTicks{}
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("5000", not "5000.00").
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

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
	// interval, when set, is a configuration's interval of the value
	// (drawn as an error bar); ok false draws none.
	interval func(d *editions.ConfigDoc) (lo, hi float64, ok bool)
	// x is the x axis label; "" is capacity.
	x string
	// joinAll joins every pair of neighbouring points of a series (a
	// replayed curve, computed at each capacity shown). Measured figures
	// join two points only when no capacity lies between them: a line
	// between two capacities far apart would draw a trend nobody measured.
	joinAll bool
}

var figures = []figure{
	{name: "decode_tok_s", title: "Pooled decode rate against capacity (bars: bootstrap 95% CI)", y: "pooled decode (tokens/s)",
		value: func(d *editions.ConfigDoc) (float64, bool) {
			return d.Metrics.PooledDecodeTokS.Value, d.Metrics.PooledDecodeTokS.Ok()
		},
		absent: "no configuration has a decode interval (one output token per request: pooled decode is UNKNOWN)",
		interval: func(d *editions.ConfigDoc) (float64, float64, bool) {
			if d.Uncertainty == nil {
				return 0, 0, false
			}
			iv := d.Uncertainty.PooledDecodeTokS
			return iv.Lo, iv.Hi, true
		}},
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
	y: "misses (measured requests)", legendRight: true, joinAll: true}

// series groups configurations by model and executor.
type series struct {
	label string
	pts   plotter.XYs
	// errs are the points' intervals as offsets below and above the
	// value (zero when a point has none); nil for a series without.
	errs plotter.YErrors
}

// xyErrs is a series' points with their intervals, for gonum's error bars.
type xyErrs struct {
	plotter.XYs
	plotter.YErrors
}

// writePlots renders the figures as PNGs under dir/plots and returns them
// for the reports, in figure order, then the misses figure when the
// edition has routing traces. A series is one model, executor and declared
// variant (Configuration.variant) of campaign c.
func writePlots(dir string, docs []editions.ConfigDoc, routing []modelRouting, c *Campaign) ([]FigureRef, error) {
	variants := map[string]string{}
	for _, cfg := range c.Configurations {
		variants[cfg.ID] = cfg.variant()
	}
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
			label := fmt.Sprintf("%s, %s", editions.CheckpointLabel(d.Checkpoint), d.Executor)
			if v := variants[d.ID]; v != "" {
				label += ", " + v
			}
			j := slices.IndexFunc(ss, func(s *series) bool { return s.label == label })
			if j < 0 {
				ss = append(ss, &series{label: label})
				j = len(ss) - 1
			}
			ss[j].pts = append(ss[j].pts, plotter.XY{X: float64(d.Capacity), Y: v})
			if f.interval != nil {
				e := struct{ Low, High float64 }{}
				if lo, hi, ok := f.interval(d); ok {
					e.Low, e.High = v-lo, hi-v
				}
				ss[j].errs = append(ss[j].errs, e)
			}
		}
		if len(ss) == 0 {
			out = append(out, FigureRef{Title: f.title, Note: f.absent})
			continue
		}
		if err := emit(f, ss); err != nil {
			return nil, err
		}
	}
	if ss := depthSeries(docs); len(ss) > 0 {
		if err := emit(depthFigure, ss); err != nil {
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

// depthFigure is the decode rate against context depth, one line per
// configuration through the depths it ran (the contract's declared depths:
// neighbours are joined), with each depth's bootstrap interval; drawn
// only for an edition with decode depths (PERF-DEPTH-v1).
var depthFigure = figure{name: "decode_by_depth", title: "Pooled decode rate against context depth (bars: bootstrap 95% CI)",
	y: "pooled decode (tokens/s)", x: "context depth (prompt tokens before the first output token)", legendRight: true, joinAll: true}

// depthSeries is one series per configuration with decode depths: pooled
// decode at each observed depth, with its interval.
func depthSeries(docs []editions.ConfigDoc) []*series {
	var ss []*series
	for i := range docs {
		d := &docs[i]
		s := &series{label: fmt.Sprintf("%s (%d/%d)", d.ID, d.Capacity, d.ExpertsPerLayer)}
		for _, dd := range d.Metrics.DecodeDepths {
			if !dd.PooledTokS.Ok() || dd.Interval == nil {
				continue
			}
			v := dd.PooledTokS.Value
			s.pts = append(s.pts, plotter.XY{X: float64(dd.DepthTokens), Y: v})
			s.errs = append(s.errs, struct{ Low, High float64 }{v - dd.Interval.Lo, dd.Interval.Hi - v})
		}
		if len(s.pts) > 0 {
			ss = append(ss, s)
		}
	}
	return ss
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
	if f.x != "" {
		p.X.Label.Text = f.x
		p.X.Tick.Marker = plainTicks{}
	}
	p.Y.Label.Text = f.y
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = !f.legendRight
	p.Add(plotter.NewGrid())
	for i, s := range ss {
		order := make([]int, len(s.pts))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case s.pts[a].X < s.pts[b].X:
				return -1
			case s.pts[a].X > s.pts[b].X:
				return 1
			}
			return 0
		})
		sorted := make(plotter.XYs, len(order))
		var errs plotter.YErrors
		for k, o := range order {
			sorted[k] = s.pts[o]
			if s.errs != nil {
				errs = append(errs, s.errs[o])
			}
		}
		pts, err := plotter.NewScatter(sorted)
		if err != nil {
			return nil, err
		}
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(3)
		p.Add(pts)
		// Lines: each run of points with no capacity missing between
		// neighbours (every neighbour with joinAll).
		var first *plotter.Line
		for lo := 0; lo < len(sorted); {
			hi := lo + 1
			for hi < len(sorted) && (f.joinAll || sorted[hi].X-sorted[hi-1].X == 1) {
				hi++
			}
			if hi-lo > 1 {
				l, err := plotter.NewLine(sorted[lo:hi])
				if err != nil {
					return nil, err
				}
				l.Color = plotutil.Color(i)
				l.Dashes = plotutil.Dashes(i)
				p.Add(l)
				if first == nil {
					first = l
				}
			}
			lo = hi
		}
		if errs != nil {
			eb, err := plotter.NewYErrorBars(xyErrs{sorted, errs})
			if err != nil {
				return nil, err
			}
			eb.Color = plotutil.Color(i)
			eb.CapWidth = vg.Points(6)
			p.Add(eb)
		}
		if first != nil {
			p.Legend.Add(s.label, first, pts)
		} else {
			p.Legend.Add(s.label, pts)
		}
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2)
	p.Y.Max *= 1.15 + 0.09*float64(len(ss)) // room for the legend above the points, a line per series
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

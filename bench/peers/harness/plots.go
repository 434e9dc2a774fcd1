package harness

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// clientColor is each client's colour in every plot.
func clientColor(name string) color.Color {
	switch name {
	case Mcpvisor:
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	case GoSDK:
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	case McpGo:
		return color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	case McpGoListen:
		return color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff} // purple
	case Floor, Spawn:
		return color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff} // grey
	}
	return color.Black
}

var (
	dashed = []vg.Length{vg.Points(6), vg.Points(3)}
	dotted = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
)

const plotW, plotH = 8 * vg.Inch, 5 * vg.Inch

// series is one line of a plot.
type series struct {
	label  string
	client string
	dashes []vg.Length
	xys    plotter.XYs
}

// logTicks are ticks at the given values, labelled with them.
func valueTicks(values []float64) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for _, v := range values {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ts
}

// drawPlot draws ss into file with log axes as asked; extra are legend
// entries without data (line styles).
func drawPlot(file, title, xLabel, yLabel string, logX, logY bool, xTicks []float64, ss []series, extra []series) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	if len(xTicks) > 0 {
		p.X.Tick.Marker = valueTicks(xTicks)
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	drawn := 0
	for _, s := range ss {
		var xys plotter.XYs
		for _, xy := range s.xys {
			if (logX && xy.X <= 0) || (logY && xy.Y <= 0) || math.IsNaN(xy.Y) {
				continue
			}
			xys = append(xys, xy)
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return false, err
		}
		l.Color = clientColor(s.client)
		l.Width = vg.Points(1.5)
		l.Dashes = s.dashes
		sc.Color = clientColor(s.client)
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(2.5)
		p.Add(l, sc)
		if s.label != "" {
			p.Legend.Add(s.label, l, sc)
		}
		drawn++
	}
	if drawn == 0 {
		return false, nil
	}
	// Room above the data for the legend, top left.
	if logY {
		p.Y.Max *= 4
	} else {
		p.Y.Max += (p.Y.Max - math.Min(p.Y.Min, 0)) * 0.4
	}
	for _, s := range extra {
		l, err := plotter.NewLine(plotter.XYs{})
		if err != nil {
			return false, err
		}
		l.Color = color.Gray{Y: 0x40}
		l.Width = vg.Points(1.5)
		l.Dashes = s.dashes
		p.Legend.Add(s.label, l)
	}
	return true, p.Save(plotW, plotH, file)
}

// WritePlots draws the PNG plots of res into dir and returns their names:
// latency percentiles and calls/s against calls in flight (per transport,
// payload and era), time to all-ready against N and memory against N
// (per transport).
func WritePlots(dir string, res *Results) ([]string, error) {
	var files []string
	save := func(name string, drawn bool, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if drawn {
			files = append(files, name)
		}
		return nil
	}
	clients := []string{Mcpvisor, GoSDK, McpGo, Floor}
	var groups []callGroup
	for _, c := range res.Call {
		if c.Client == Floor || c.Error != "" {
			continue
		}
		g := callGroup{c.Transport, c.PayloadBytes, c.Era}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		var levels []float64
		for _, c := range res.Call {
			if c.Transport == g.transport && c.PayloadBytes == g.payload && (c.Era == g.era || c.Client == Floor) && !slices.Contains(levels, float64(c.InFlight)) {
				levels = append(levels, float64(c.InFlight))
			}
		}
		if len(levels) < 2 {
			continue // nothing to plot against calls in flight
		}
		slices.Sort(levels)
		var lat, rate []series
		for _, client := range clients {
			era := g.era
			if client == Floor {
				era = ""
			}
			pct := [3]plotter.XYs{}
			var cps plotter.XYs
			for _, n := range levels {
				c := findCall(res, client, g.transport, era, g.payload, int(n))
				if c == nil {
					continue
				}
				pct[0] = append(pct[0], plotter.XY{X: n, Y: c.P50Us})
				pct[1] = append(pct[1], plotter.XY{X: n, Y: c.P90Us})
				pct[2] = append(pct[2], plotter.XY{X: n, Y: c.P99Us})
				cps = append(cps, plotter.XY{X: n, Y: c.CallsPerSec})
			}
			if len(cps) == 0 {
				continue
			}
			lat = append(lat, series{label: client, client: client, xys: pct[0]},
				series{client: client, dashes: dashed, xys: pct[1]},
				series{client: client, dashes: dotted, xys: pct[2]})
			rate = append(rate, series{label: client, client: client, xys: cps})
		}
		suffix := fmt.Sprintf("%s-%s-%s", g.transport, sizeSlug(g.payload), g.era)
		title := fmt.Sprintf("%s, %s, era %s", g.transport, SizeName(g.payload), g.era)
		name := "latency-" + suffix + ".png"
		drawn, err := drawPlot(filepath.Join(dir, name), "Latency per call vs calls in flight: "+title, "calls in flight", "latency (µs)", true, true, levels, lat,
			[]series{{label: "p50", dashes: nil}, {label: "p90", dashes: dashed}, {label: "p99", dashes: dotted}})
		if err := save(name, drawn, err); err != nil {
			return files, err
		}
		name = "throughput-" + suffix + ".png"
		drawn, err = drawPlot(filepath.Join(dir, name), "Calls/s vs calls in flight: "+title, "calls in flight", "calls/s", true, false, levels, rate, nil)
		if err := save(name, drawn, err); err != nil {
			return files, err
		}
	}

	for _, tr := range []string{TransportStdio, TransportHTTP} {
		var ns []float64
		for _, c := range res.Connect {
			if c.Transport == tr && c.Error == "" && !slices.Contains(ns, float64(c.N)) {
				ns = append(ns, float64(c.N))
			}
		}
		if len(ns) == 0 {
			continue
		}
		slices.Sort(ns)
		var ready, mem []series
		for _, client := range []string{Mcpvisor, GoSDK, McpGo, McpGoListen, Spawn} {
			var r, m, rss plotter.XYs
			for _, n := range ns {
				c := findConnect(res, client, tr, int(n))
				if c == nil {
					continue
				}
				r = append(r, plotter.XY{X: n, Y: c.AllReadyMs})
				if client != Spawn {
					m = append(m, plotter.XY{X: n, Y: (c.HeapPerConn + c.StackPerConn) * n / (1 << 20)})
					rss = append(rss, plotter.XY{X: n, Y: float64(c.PeakRSSGrowthBytes) / (1 << 20)})
				}
			}
			label := client
			if client == Spawn {
				label = "bare spawn"
			}
			ready = append(ready, series{label: label, client: client, xys: r})
			if len(m) > 0 {
				mem = append(mem, series{label: client, client: client, xys: m}, series{client: client, dashes: dashed, xys: rss})
			}
		}
		logX := ns[len(ns)-1]/ns[0] >= 10
		era := ConnectEraStdio
		if tr == TransportHTTP {
			era = ConnectEraHTTP
		}
		name := "connect-" + tr + ".png"
		drawn, err := drawPlot(filepath.Join(dir, name), fmt.Sprintf("Time to all-ready vs N (%s, era %s)", tr, era), "N servers (sessions)", "time to all ready (ms)", logX, logX, ns, ready, nil)
		if err := save(name, drawn, err); err != nil {
			return files, err
		}
		name = "memory-" + tr + ".png"
		drawn, err = drawPlot(filepath.Join(dir, name), fmt.Sprintf("Client memory vs N, all idle (%s, era %s)", tr, era), "N servers (sessions)", "MiB", logX, false, ns, mem,
			[]series{{label: "heap + stacks (after GC)"}, {label: "peak RSS growth while connecting", dashes: dashed}})
		if err := save(name, drawn, err); err != nil {
			return files, err
		}
	}
	return files, nil
}

func sizeSlug(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

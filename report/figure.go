package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"image/color"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is one chart. gonum/plot draws its frame (title, axes, ticks, grid)
// as SVG; the data marks and the legend are SVG elements of their own, placed
// through the plot's data transform, so that the page and its tests can tell
// them apart: class "mark" on every data mark (with data-trial naming its
// trial), "ref" on reference lines, "label" on value texts, and g.legend on
// the legend. The legend goes in a corner of the data area that no mark,
// reference line or label touches; failing that, the value axis is raised to
// make room (headroom), and failing that it goes under the chart.
type figure struct {
	p           *plot.Plot
	w, h        vg.Length
	label       string // accessible name of the SVG
	marks       []mark
	legend      []legendItem
	headroom    bool // the y axis is a value axis whose maximum may be raised for the legend
	legendBelow bool // put the legend under the chart, whatever the corners
}

type shape int

const (
	shapeCircle   shape = iota // at (x, y), radius r
	shapeRing                  // circle outline
	shapeDiamond               // at (x, y), half-diagonal r
	shapeCross                 // at (x, y), half-size r
	shapeRect                  // x..x2, y..y2
	shapeWhisker               // (x, y) to (x2, y2) with caps of half-width r
	shapeSegment               // (x, y) to (x2, y2)
	shapeText                  // text at (x, y), font size r, offset dx, dy
	shapePolyline              // through pts, one path (long series)
)

// mark is one SVG element in data coordinates.
type mark struct {
	shape        shape
	class        string // "mark point", "ref", "label", ...
	x, y, x2, y2 float64
	r            vg.Length
	fill, stroke color.Color
	width        vg.Length // stroke width
	dash         bool
	text, anchor string    // shapeText: content, start | middle | end
	dx, dy       vg.Length // shapeText offset (SVG direction: dy > 0 is down)
	attrs        [][2]string
	title        string       // tooltip
	pts          [][2]float64 // shapePolyline: the points in data coordinates
}

// legendItem is one entry: a swatch drawn like a mark, and its text.
type legendItem struct {
	text   string
	shape  shape // shapeCircle, shapeRing, shapeDiamond, shapeCross, shapeRect, shapeSegment
	fill   color.Color
	stroke color.Color
	dash   bool
}

// box is a rectangle in SVG coordinates (y down).
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

const (
	legendPad    = 5.0  // pt inside the legend box
	legendSwatch = 14.0 // pt
	legendRow    = 13.0 // pt per entry
	legendFont   = 9.0  // pt
	legendInset  = 4.0  // pt between the legend and the data area's edge
	textMargin   = 1.2  // the browser's font may be wider than gonum's metrics
	stripLeft    = 10.0 // pt from the left edge to a legend under the chart
)

// svg renders the figure.
func (f *figure) svg() (template.HTML, error) {
	corner, below := box{}, f.legendBelow || len(f.legend) == 0
	if !below {
		found := false
		for try := 0; try < 3 && !found; try++ {
			if try > 0 {
				if !f.headroom {
					break
				}
				f.p.Y.Max += 0.22 * (f.p.Y.Max - f.p.Y.Min)
			}
			l := f.layout(0)
			corner, found = f.freeCorner(l)
		}
		below = !found
	}
	strip := vg.Length(0)
	if below && len(f.legend) > 0 {
		strip = vg.Points(f.stripHeight())
	}
	l := f.layout(strip)
	var b strings.Builder
	b.WriteString(`<g class="overlay">`)
	for _, m := range f.marks {
		writeMark(&b, l, m)
	}
	switch {
	case len(f.legend) == 0:
	case below:
		f.writeStrip(&b, l)
	default:
		f.writeLegendBox(&b, corner)
	}
	b.WriteString("</g>")

	var buf bytes.Buffer
	if _, err := l.canvas.WriteTo(&buf); err != nil {
		return "", err
	}
	out := buf.String()
	i, j := strings.Index(out, "<svg"), strings.LastIndex(out, "</svg>")
	if i < 0 || j < i {
		return "", fmt.Errorf("vgsvg produced no <svg> element")
	}
	out = `<svg class="chart" role="img" aria-label="` + html.EscapeString(f.label) + `" ` +
		out[i+len("<svg "):j] + b.String() + "</svg>"
	return template.HTML(out), nil // #nosec: vgsvg escapes its text, writeMark escapes ours
}

// layout is the frame drawn on a canvas, with the transform of the data area.
type layout struct {
	canvas *vgsvg.Canvas
	height float64 // of the whole SVG, pt
	area   box     // the data area, SVG coordinates
	tx, ty func(float64) vg.Length
}

// at maps data coordinates to SVG coordinates.
func (l layout) at(x, y float64) (float64, float64) {
	return l.tx(x).Points(), l.height - l.ty(y).Points()
}

// layout draws the frame on a fresh canvas with strip points of room below.
func (f *figure) layout(strip vg.Length) layout {
	c := vgsvg.New(f.w, f.h+strip)
	plotC := draw.Crop(draw.New(c), 0, 0, strip, 0)
	f.p.Draw(plotC)
	da := f.p.DataCanvas(plotC)
	tx, ty := f.p.Transforms(&da)
	H := (f.h + strip).Points()
	return layout{canvas: c, height: H, tx: tx, ty: ty,
		area: box{da.Min.X.Points(), H - da.Max.Y.Points(), da.Max.X.Points(), H - da.Min.Y.Points()}}
}

// bounds is the box a mark covers, in SVG coordinates.
func (m mark) bounds(l layout) box {
	x, y := l.at(m.x, m.y)
	r := m.r.Points()
	switch m.shape {
	case shapeRect, shapeWhisker, shapeSegment:
		x2, y2 := l.at(m.x2, m.y2)
		b := box{min(x, x2), min(y, y2), max(x, x2), max(y, y2)}
		if m.shape == shapeWhisker { // the caps are perpendicular to the whisker
			if x == x2 {
				b.x0, b.x1 = x-r, x+r
			} else {
				b.y0, b.y1 = y-r, y+r
			}
		}
		w := m.width.Points() / 2
		return box{b.x0 - w, b.y0 - w, b.x1 + w, b.y1 + w}
	case shapePolyline:
		b := box{x, y, x, y}
		for _, pt := range m.pts {
			px, py := l.at(pt[0], pt[1])
			b = box{min(b.x0, px), min(b.y0, py), max(b.x1, px), max(b.y1, py)}
		}
		return b
	case shapeText:
		x += m.dx.Points()
		y += m.dy.Points()
		w := textWidth(m.text, r)
		switch m.anchor {
		case "middle":
			x -= w / 2
		case "end":
			x -= w
		}
		return box{x, y - 0.8*r, x + w, y + 0.25*r}
	}
	return box{x - r - 1, y - r - 1, x + r + 1, y + r + 1}
}

// textWidth estimates a text's width at size pt with the plot's sans font,
// with a margin for the browser's substitute.
func textWidth(s string, size float64) float64 {
	st := draw.TextStyle{Font: plotFont(size), Handler: plot.DefaultTextHandler}
	return textMargin * st.Width(s).Points()
}

// writeMark writes one mark as an SVG element.
func writeMark(b *strings.Builder, l layout, m mark) {
	var attrs strings.Builder
	fmt.Fprintf(&attrs, ` class="%s"`, html.EscapeString(m.class))
	for _, a := range m.attrs {
		fmt.Fprintf(&attrs, ` %s="%s"`, a[0], html.EscapeString(a[1]))
	}
	title := ""
	if m.title != "" {
		title = "<title>" + html.EscapeString(m.title) + "</title>"
	}
	x, y := l.at(m.x, m.y)
	switch m.shape {
	case shapeRect:
		x2, y2 := l.at(m.x2, m.y2)
		stroke := ""
		if m.stroke != nil {
			stroke = fmt.Sprintf(` stroke="%s" stroke-width="%s"`, hexColor(m.stroke), ff(m.width.Points()))
		}
		fmt.Fprintf(b, `<rect%s x="%s" y="%s" width="%s" height="%s" fill="%s"%s>%s</rect>`, attrs.String(),
			ff(min(x, x2)), ff(min(y, y2)), ff(abs(x2-x)), ff(abs(y2-y)), hexColor(m.fill), stroke, title)
	case shapeWhisker:
		x2, y2 := l.at(m.x2, m.y2)
		r := m.r.Points()
		var d string
		if x == x2 {
			d = fmt.Sprintf("M%s,%sH%sM%s,%sV%sM%s,%sH%s", ff(x-r), ff(y), ff(x+r), ff(x), ff(y), ff(y2), ff(x-r), ff(y2), ff(x+r))
		} else {
			d = fmt.Sprintf("M%s,%sV%sM%s,%sH%sM%s,%sV%s", ff(x), ff(y-r), ff(y+r), ff(x), ff(y), ff(x2), ff(x2), ff(y-r), ff(y+r))
		}
		fmt.Fprintf(b, `<path%s d="%s" fill="none" stroke="%s" stroke-width="%s">%s</path>`, attrs.String(), d, hexColor(m.stroke), ff(m.width.Points()), title)
	case shapeSegment:
		x2, y2 := l.at(m.x2, m.y2)
		dash := ""
		if m.dash {
			dash = ` stroke-dasharray="4,3"`
		}
		fmt.Fprintf(b, `<line%s x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s>%s</line>`, attrs.String(),
			ff(x), ff(y), ff(x2), ff(y2), hexColor(m.stroke), ff(m.width.Points()), dash, title)
	case shapePolyline:
		var d strings.Builder
		for i, pt := range m.pts {
			px, py := l.at(pt[0], pt[1])
			if i == 0 {
				d.WriteString("M")
			} else {
				d.WriteString("L")
			}
			d.WriteString(ff(px) + "," + ff(py))
		}
		fmt.Fprintf(b, `<path%s d="%s" fill="none" stroke="%s" stroke-width="%s">%s</path>`, attrs.String(), d.String(), hexColor(m.stroke), ff(m.width.Points()), title)
	case shapeText:
		anchor := m.anchor
		if anchor == "" {
			anchor = "start"
		}
		fill := m.fill
		if fill == nil {
			fill = color.RGBA{40, 40, 40, 255}
		}
		fmt.Fprintf(b, `<text%s x="%s" y="%s" text-anchor="%s" font-size="%s" fill="%s">%s%s</text>`, attrs.String(),
			ff(x+m.dx.Points()), ff(y+m.dy.Points()), anchor, ff(m.r.Points()), hexColor(fill), html.EscapeString(m.text), title)
	default:
		writeShape(b, m.shape, x, y, m.r.Points(), m.fill, m.stroke, m.width.Points(), attrs.String(), title)
	}
}

// writeShape writes a glyph centred at (x, y).
func writeShape(b *strings.Builder, s shape, x, y, r float64, fill, stroke color.Color, width float64, attrs, title string) {
	paint := func() string {
		out := ` fill="none"`
		if fill != nil {
			out = ` fill="` + hexColor(fill) + `"`
		}
		if stroke != nil {
			out += ` stroke="` + hexColor(stroke) + `" stroke-width="` + ff(width) + `"`
		}
		return out
	}
	switch s {
	case shapeRing:
		fill = nil
		fmt.Fprintf(b, `<circle%s cx="%s" cy="%s" r="%s"%s>%s</circle>`, attrs, ff(x), ff(y), ff(r), paint(), title)
	case shapeDiamond:
		fmt.Fprintf(b, `<path%s d="M%s,%sL%s,%sL%s,%sL%s,%sZ"%s>%s</path>`, attrs,
			ff(x), ff(y-r), ff(x+r), ff(y), ff(x), ff(y+r), ff(x-r), ff(y), paint(), title)
	case shapeCross:
		fill = nil
		fmt.Fprintf(b, `<path%s d="M%s,%sL%s,%sM%s,%sL%s,%s"%s>%s</path>`, attrs,
			ff(x-r), ff(y-r), ff(x+r), ff(y+r), ff(x-r), ff(y+r), ff(x+r), ff(y-r), paint(), title)
	default:
		fmt.Fprintf(b, `<circle%s cx="%s" cy="%s" r="%s"%s>%s</circle>`, attrs, ff(x), ff(y), ff(r), paint(), title)
	}
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func hexColor(c color.Color) string {
	if c == nil {
		return "none"
	}
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
}

package report

import (
	"fmt"
	"html"
	"strings"
)

// A figure's legend: its size, the free corner it goes in, or the strip
// under the chart, and how its entries are drawn.

func (f *figure) legendSize() (w, h float64) {
	for _, it := range f.legend {
		w = max(w, textWidth(it.text, legendFont))
	}
	return 2*legendPad + legendSwatch + 4 + w, 2*legendPad + legendRow*float64(len(f.legend)) - 2
}

// freeCorner is the first corner of the data area (top right, top left,
// bottom right, bottom left) where the legend touches no mark.
func (f *figure) freeCorner(l layout) (box, bool) {
	w, h := f.legendSize()
	a := l.area
	var obstacles []box
	for _, m := range f.marks {
		b := m.bounds(l)
		obstacles = append(obstacles, box{b.x0 - 2, b.y0 - 2, b.x1 + 2, b.y1 + 2})
	}
	for _, c := range []box{
		{a.x1 - legendInset - w, a.y0 + legendInset, a.x1 - legendInset, a.y0 + legendInset + h},
		{a.x0 + legendInset, a.y0 + legendInset, a.x0 + legendInset + w, a.y0 + legendInset + h},
		{a.x1 - legendInset - w, a.y1 - legendInset - h, a.x1 - legendInset, a.y1 - legendInset},
		{a.x0 + legendInset, a.y1 - legendInset - h, a.x0 + legendInset + w, a.y1 - legendInset},
	} {
		if c.x0 < a.x0 || c.y0 < a.y0 {
			continue // the data area is smaller than the legend
		}
		free := true
		for _, o := range obstacles {
			if c.overlaps(o) {
				free = false
				break
			}
		}
		if free {
			return c, true
		}
	}
	return box{}, false
}

func (f *figure) writeLegendBox(b *strings.Builder, at box) {
	fmt.Fprintf(b, `<g class="legend" transform="translate(%s,%s)">`, ff(at.x0), ff(at.y0))
	fmt.Fprintf(b, `<rect class="legend-box" x="0" y="0" width="%s" height="%s" fill="#ffffff" fill-opacity="0.92" stroke="#c8c8c8" stroke-width="0.6"/>`,
		ff(at.x1-at.x0), ff(at.y1-at.y0))
	for i, it := range f.legend {
		writeLegendItem(b, legendPad, legendPad+legendRow*float64(i)+legendRow/2-1, it)
	}
	b.WriteString("</g>")
}

// stripItems lays the legend out in rows across the chart's width.
func (f *figure) stripItems() (pos [][2]float64, rows int) {
	x, row := 0.0, 0
	maxW := f.w.Points() - 2*stripLeft
	for _, it := range f.legend {
		w := legendSwatch + 4 + textWidth(it.text, legendFont) + 14
		if x > 0 && x+w > maxW {
			x, row = 0, row+1
		}
		pos = append(pos, [2]float64{x, float64(row)})
		x += w
	}
	return pos, row + 1
}

func (f *figure) stripHeight() float64 {
	_, rows := f.stripItems()
	return 2*legendPad + legendRow*float64(rows) + 4
}

func (f *figure) writeStrip(b *strings.Builder, l layout) {
	pos, _ := f.stripItems()
	top := l.height - f.stripHeight() + 4
	fmt.Fprintf(b, `<g class="legend legend-below" transform="translate(%s,%s)">`, ff(stripLeft), ff(top))
	for i, it := range f.legend {
		writeLegendItem(b, pos[i][0], legendPad+legendRow*pos[i][1]+legendRow/2-1, it)
	}
	b.WriteString("</g>")
}

func writeLegendItem(b *strings.Builder, x, y float64, it legendItem) {
	cx := x + legendSwatch/2
	switch it.shape {
	case shapeSegment:
		dash := ""
		if it.dash {
			dash = ` stroke-dasharray="4,3"`
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.2"%s/>`,
			ff(x), ff(y), ff(x+legendSwatch), ff(y), hexColor(it.stroke), dash)
	case shapeRect:
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="8" fill="%s"/>`, ff(x+1), ff(y-4), ff(legendSwatch-2), hexColor(it.fill))
	default:
		writeShape(b, it.shape, cx, y, 4, it.fill, it.stroke, 1.2, "", "")
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" font-size="%s" fill="#222">%s</text>`,
		ff(x+legendSwatch+4), ff(y+3.2), ff(legendFont), html.EscapeString(it.text))
}

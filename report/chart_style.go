package report

import "image/color"

// washOut mixes a colour with four parts of light grey: an undecided cell
// keeps its hue as a hint but not the strength of a decided one.
func washOut(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((float64(v>>8) + 4*230) / 5) }
	return color.RGBA{mix(r), mix(g), mix(b), 255}
}

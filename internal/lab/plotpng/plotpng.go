// Package plotpng writes the experiment harnesses' gonum plots (failover,
// dsexp, ccexp, scaleexp) as PNG files: one drawn canvas, or panels
// stacked in one column.
package plotpng

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Width is the width of a stacked figure.
const Width = 9 * vg.Inch

// Stack draws panels one above the other, each panelHeight tall, aligned
// on their axes, into a PNG at path.
func Stack(path string, panelHeight vg.Length, panels ...*plot.Plot) error {
	img := vgimg.New(Width, vg.Length(len(panels))*panelHeight)
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	return Write(img, path)
}

// Write writes a drawn canvas as a PNG at path.
func Write(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	return nil
}

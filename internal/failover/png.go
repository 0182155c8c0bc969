package failover

import (
	"fmt"
	"os"

	"gonum.org/v1/plot/vg/vgimg"
)

func savePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("failover: write %s: %w", path, err)
	}
	return f.Close()
}

package failover

import (
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
)

func savePNG(img *vgimg.Canvas, path string) error { return plotpng.Write(img, path) }

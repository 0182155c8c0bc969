package ccreal

import (
	"context"
	"encoding/json"
	"os"
	"testing"
)

func TestTmpFull(t *testing.T) {
	if os.Getenv("CCREAL_FULL") == "" {
		t.Skip()
	}
	var o Options
	switch os.Getenv("CCREAL_FULL") {
	case "e1":
		o = E1Options("/tmp/ccreal-bin/aerie-pre", "/tmp/ccreal-run/e1cc", true)
	case "e1no":
		o = E1Options("/tmp/ccreal-bin/aerie-pre", "/tmp/ccreal-run/e1nocc", false)
	case "e2":
		o = E2Options("/tmp/ccreal-bin/aerie-pre", "/tmp/ccreal-run/e2")
	}
	o.Progress = os.Stderr
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	b, _ := json.Marshal(res)
	os.WriteFile("/tmp/ccreal-run/"+os.Getenv("CCREAL_FULL")+".json", b, 0o644)
}

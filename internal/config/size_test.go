package config

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"50GB": 50e9, "1.5GiB": 3 << 29, "512KiB": 512 << 10, "2MB": 2e6, "1TB": 1e12, "1TiB": 1 << 40, "100B": 100, " 7 MiB ": 7 << 20,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, err := ParseSize(FormatSize(got)); err != nil || back != got {
			t.Errorf("FormatSize(%d) = %q reads back as %d, %v", got, FormatSize(got), back, err)
		}
	}
	for _, in := range []string{"", "50", "0GB", "-1MB", "GB", "1.5XB", "50 G", "1e30TB", "0.1B"} {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), "positive size") {
			t.Errorf("ParseSize(%q): %v, want a refusal that explains the format", in, err)
		}
	}
}

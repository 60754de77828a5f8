package boltstore

import "testing"

// The file grows by a sixty-fourth of its size, within 256 KiB..16 MiB:
// the slack past its last page stays under 2% of a file past 16 MiB.
func TestGrowStep(t *testing.T) {
	for _, c := range []struct {
		size int64
		want int
	}{
		{0, 256 << 10},
		{4 << 20, 256 << 10},
		{16 << 20, 256 << 10},
		{64 << 20, 1 << 20},
		{1 << 30, 16 << 20},
		{8 << 30, 16 << 20},
	} {
		if got := growStep(c.size); got != c.want {
			t.Errorf("growStep(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

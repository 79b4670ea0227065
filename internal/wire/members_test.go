package wire

import "testing"

func TestFoldIs(t *testing.T) {
	for _, name := range []string{"id", "ID", "Id", "params", "paramſ", "PARAMS", "progressToken", "progress_token", "_meta", "\u212aey", "ıd", "x", "", "idx", "i", "naMe", "名"} {
		for _, target := range []string{"ID", "PARAMS", "PROGRESSTOKEN", "META", "KEY", "NAME"} {
			if got, want := FoldIs(name, target), FoldName(name) == target; got != want {
				t.Errorf("FoldIs(%q, %q) = %v, FoldName says %v", name, target, got, want)
			}
		}
	}
}

func FuzzFoldIs(f *testing.F) {
	f.Add("paramſ", "PARAMS")
	f.Fuzz(func(t *testing.T, name, target string) {
		target = FoldName(target)
		for i := 0; i < len(target); i++ {
			if target[i] >= 0x80 {
				return // FoldIs compares with ASCII targets only
			}
		}
		if FoldIs(name, target) != (FoldName(name) == target) {
			t.Fatalf("FoldIs(%q, %q) disagrees with FoldName", name, target)
		}
	})
}

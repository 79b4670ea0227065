package catalog

import (
	"slices"

	"github.com/hashicorp/go-hclog"
)

// duplicate is one tool name, prompt name or resource URI that two servers
// list: the first keeps it, the later one's is left out.
type duplicate struct {
	what, field, key, kept, skipped string
}

// LogDuplicates warns about the duplicates of next that prev (the catalog
// it replaces; nil for none) did not have. A catalog is rebuilt at every
// discovery, list change, reload and cache reset, so the warning comes once
// per change of the set of duplicates instead of at every rebuild.
func LogDuplicates[S any](prev, next *Catalog[S], log hclog.Logger) {
	var seen []duplicate
	if prev != nil {
		seen = prev.dups
	}
	for _, d := range next.dups {
		if !slices.Contains(seen, d) {
			log.Warn("duplicate "+d.what+"; keeping the first", d.field, d.key, "kept_server", d.kept, "skipped_server", d.skipped)
		}
	}
}

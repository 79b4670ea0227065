package upstream

import "fmt"

// The caps on what one server may list. Discovery keeps every item a
// server lists in memory (and in the catalog every client reads), so each
// list (tools, prompts, resources, resource templates) is capped across
// all its pages. A server past a cap is skipped, with a reason that names
// the cap, like any server whose discovery fails; maxListPages bounds the
// round trips.
const (
	maxListItems = 10000
	maxListBytes = 16 << 20
	maxListPages = 1000
)

// listBudget counts one list's pages against the caps.
type listBudget struct {
	method       string
	items, bytes int
}

// spend adds one page; past a cap it returns the error that skips the server.
func (b *listBudget) spend(pageBytes, pageItems int) error {
	b.items += pageItems
	b.bytes += pageBytes
	switch {
	case b.items > maxListItems:
		return fmt.Errorf("%s returned more than %d items, the cap on one list of a server", b.method, maxListItems)
	case b.bytes > maxListBytes:
		return fmt.Errorf("%s returned more than %d MiB, the cap on one list of a server", b.method, maxListBytes>>20)
	}
	return nil
}

// unendedList is the error of a list still paging after maxListPages.
func unendedList(method string) error {
	return fmt.Errorf("%s did not end after %d pages", method, maxListPages)
}

// Package listcap bounds what one server may list: discovery keeps every
// item a server lists in memory (and in the catalog every client reads),
// so each list (tools, prompts, resources, resource templates) is capped
// across all its pages. A server past a cap is skipped, with a reason
// that names the cap, like any server whose discovery fails; MaxPages
// bounds the round trips.
package listcap

import "fmt"

// The caps of one list of one server.
const (
	MaxItems = 10000
	MaxBytes = 16 << 20
	MaxPages = 1000
)

// Budget counts one list's pages against the caps.
type Budget struct {
	Method       string
	items, bytes int
}

// Spend adds one page; past a cap it returns the error that skips the server.
func (b *Budget) Spend(pageBytes, pageItems int) error {
	b.items += pageItems
	b.bytes += pageBytes
	switch {
	case b.items > MaxItems:
		return fmt.Errorf("%s returned more than %d items, the cap on one list of a server", b.Method, MaxItems)
	case b.bytes > MaxBytes:
		return fmt.Errorf("%s returned more than %d MiB, the cap on one list of a server", b.Method, MaxBytes>>20)
	}
	return nil
}

// Unended is the error of a list still paging after MaxPages.
func Unended(method string) error {
	return fmt.Errorf("%s did not end after %d pages", method, MaxPages)
}

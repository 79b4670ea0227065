package catalog

// duplicate is one tool name, prompt name or resource URI that two servers
// list: the first keeps it, the later one's is left out (logged by
// LogWarnings, conflicts.go).
type duplicate struct {
	what, field, key, kept, skipped string
}

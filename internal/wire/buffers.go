package wire

import "sync"

// MaxPooled is the largest buffer capacity Buffers keeps. Most messages are
// a few KiB; a buffer grown for a rare multi-megabyte one is left to the
// garbage collector instead of staying pinned in the pool.
const MaxPooled = 64 << 10

// Buffers is a pool of byte slices for reading and encoding messages. The
// zero value is ready to use.
type Buffers struct{ p sync.Pool }

// Get returns an empty buffer.
func (b *Buffers) Get() *[]byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return v
	}
	s := make([]byte, 0, 4096)
	return &s
}

// Put returns a buffer for reuse; one grown past MaxPooled is dropped.
// buf[:0] must be stored back into *bp by the caller when it grew.
func (b *Buffers) Put(bp *[]byte) {
	if cap(*bp) > MaxPooled {
		return
	}
	*bp = (*bp)[:0]
	b.p.Put(bp)
}

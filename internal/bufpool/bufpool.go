// Package bufpool keeps byte buffers of more than 2 KiB, up to 1 MiB, in
// pools by size class, four classes per doubling (2.5, 3, 3.5, 4, 5 KiB
// and so on: every power of two is a class), so a buffer is at most a
// quarter larger than what it was asked for: an agent's 142 KB request
// body takes a 160 KiB buffer, a Responses stream's 25 KB
// response.created event a 28 KiB one. A request's body, a non-stream
// answer, an SSE reader's buffer and the events a gate holds before
// commit each take one and give it back when done, where a fresh buffer
// per request (zeroed, its pages faulted in, collected soon after) cost
// more than the work on its bytes.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 11 // 2 KiB
	maxShift = 20 // 1 MiB

	// Min is the size below every pooled one, Max the largest.
	Min = 1 << minShift
	Max = 1 << maxShift
)

var pools [(maxShift - minShift) * 4]sync.Pool

// Class is the pool of a buffer for n bytes (Min < n <= Max; a smaller n
// is Min's class), and that buffer's size: 2^p + k*2^(p-2) for the power
// 2^p below n. A buffer of a class's size is in that class.
func Class(n int) (class, size int) {
	n = max(n, Min+1)
	p := bits.Len64(uint64(n-1)) - 1
	quarter := 1 << (p - 2)
	k := (n - 1<<p + quarter - 1) / quarter // 1..4
	return (p-minShift)*4 + k - 1, 1<<p + k*quarter
}

// Get returns a buffer of at least n bytes (n <= Max), its length its
// class's size: from the class's pool, or made.
func Get(n int) *[]byte {
	class, size := Class(n)
	if b, ok := pools[class].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, size)
	return &b
}

// Put gives b back to its class's pool. b must have come from Get and be
// unused from now on (its capacity is its class's size); a buffer of
// another capacity is left to the collector, and nil is nothing.
func Put(b *[]byte) {
	if b == nil {
		return
	}
	c := cap(*b)
	if c <= Min || c > Max {
		return
	}
	class, size := Class(c)
	if size != c {
		return
	}
	*b = (*b)[:c]
	pools[class].Put(b)
}

package bufpool

import "testing"

// Every size from just over Min to Max has a class whose buffer holds
// it with at most a quarter to spare; the classes are distinct, in order
// and in range; a buffer of a class's size is in that class.
func TestClass(t *testing.T) {
	prev := -1
	for n := Min + 1; n <= Max; n += 97 {
		class, size := Class(n)
		if class < 0 || class >= len(pools) || class < prev {
			t.Fatalf("n=%d: class %d (previous %d, %d pools)", n, class, prev, len(pools))
		}
		if size < n || float64(size) > 1.25*float64(n) {
			t.Fatalf("n=%d: buffer of %d", n, size)
		}
		if c2, s2 := Class(size); c2 != class || s2 != size {
			t.Fatalf("n=%d: a buffer of its class's size %d is in class %d (%d), not %d", n, size, c2, s2, class)
		}
		prev = class
	}
	if c, s := Class(142_672); s != 160<<10 || c != 24 {
		t.Errorf("an agent's 142 KB body: class %d, buffer %d", c, s)
	}
	if _, s := Class(1); s != 2560 {
		t.Errorf("the smallest buffer is %d bytes, want 2.5 KiB", s)
	}
	for n := 4 << 10; n <= Max; n *= 2 {
		if _, s := Class(n); s != n {
			t.Errorf("a power of two, %d, takes a buffer of %d", n, s)
		}
	}
	if c, s := Class(Max); c != len(pools)-1 || s != Max {
		t.Errorf("Max: class %d, size %d", c, s)
	}
}

// Get gives a buffer of its class's size; Put takes back only buffers of
// a class's size, whole.
func TestGetPut(t *testing.T) {
	Put(nil)
	for _, n := range []int{1, Min, Min + 1, 4096, 30_000, 142_672, Max} {
		b := Get(n)
		_, size := Class(n)
		if len(*b) != size || cap(*b) != size {
			t.Fatalf("Get(%d): len %d cap %d, want %d", n, len(*b), cap(*b), size)
		}
		*b = (*b)[:3] // a caller that resliced it
		Put(b)
	}
	for _, c := range []int{Min, Min + 5, 11_000, Max + 1} { // 11,000: between the 10 and 12 KiB classes
		b := make([]byte, c)
		Put(&b) // not a class's size: left to the collector, never handed out
	}
	for range 100 {
		if b := Get(11_000); cap(*b) != 12<<10 || len(*b) != cap(*b) {
			t.Fatalf("Get(11000) after foreign Puts: len %d cap %d", len(*b), cap(*b))
		}
	}
}

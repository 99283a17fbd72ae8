package mux

import "sync"

// DATA payloads are read into buffers from size-classed pools (512 bytes
// to maxDataPayload, powers of two) and given back once the stream has
// copied them out (Read) or dropped them, so a busy connection does not
// allocate a buffer per frame. A buffer never leaves the stream: Read
// copies out of it. The pools hold array pointers, so putting one back
// allocates nothing.

var (
	pool512, pool1k, pool2k, pool4k, pool8k, pool16k, pool32k, pool64k sync.Pool
)

func take[A any](p *sync.Pool) *A {
	if a, ok := p.Get().(*A); ok {
		return a
	}
	return new(A)
}

// getData returns a buffer of length n for a DATA payload.
func getData(n int) []byte {
	switch {
	case n <= 512:
		return take[[512]byte](&pool512)[:n]
	case n <= 1<<10:
		return take[[1 << 10]byte](&pool1k)[:n]
	case n <= 2<<10:
		return take[[2 << 10]byte](&pool2k)[:n]
	case n <= 4<<10:
		return take[[4 << 10]byte](&pool4k)[:n]
	case n <= 8<<10:
		return take[[8 << 10]byte](&pool8k)[:n]
	case n <= 16<<10:
		return take[[16 << 10]byte](&pool16k)[:n]
	case n <= 32<<10:
		return take[[32 << 10]byte](&pool32k)[:n]
	case n <= 64<<10:
		return take[[64 << 10]byte](&pool64k)[:n]
	}
	return make([]byte, n)
}

// putData gives back a buffer getData returned; nothing may use it after.
// A buffer of no class is left to the collector.
func putData(b []byte) {
	switch cap(b) {
	case 512:
		pool512.Put((*[512]byte)(b[:512]))
	case 1 << 10:
		pool1k.Put((*[1 << 10]byte)(b[:1<<10]))
	case 2 << 10:
		pool2k.Put((*[2 << 10]byte)(b[:2<<10]))
	case 4 << 10:
		pool4k.Put((*[4 << 10]byte)(b[:4<<10]))
	case 8 << 10:
		pool8k.Put((*[8 << 10]byte)(b[:8<<10]))
	case 16 << 10:
		pool16k.Put((*[16 << 10]byte)(b[:16<<10]))
	case 32 << 10:
		pool32k.Put((*[32 << 10]byte)(b[:32<<10]))
	case 64 << 10:
		pool64k.Put((*[64 << 10]byte)(b[:64<<10]))
	}
}

package felix

import "context"

// takeBatch waits for one request on reqC (or ctx's end, reporting false),
// then takes whatever else is already queued until the frames add up to
// maxBytes. Writers use it to put every queued frame into one Write.
func takeBatch[T any](ctx context.Context, reqC <-chan T, batch []T, frameLen func(T) int, maxBytes int) ([]T, bool) {
	select {
	case r := <-reqC:
		batch = append(batch[:0], r)
	case <-ctx.Done():
		return batch[:0], false
	}
	size := frameLen(batch[0])
	for size < maxBytes {
		select {
		case r := <-reqC:
			batch = append(batch, r)
			size += frameLen(r)
		default:
			return batch, true
		}
	}
	return batch, true
}

// closed reports whether c has been closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

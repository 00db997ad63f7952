package chunk

import "slices"

// LargestFirst orders work by descending size, keeping the given order
// among equals. With workers taking the next item as they finish, the
// longest item never starts last, so no worker idles while another still
// has a big table to go.
func LargestFirst[T any](items []T, size func(T) int64) {
	slices.SortStableFunc(items, func(a, b T) int {
		sa, sb := size(a), size(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
}

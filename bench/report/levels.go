package main

import (
	"fmt"
	"strconv"
	"strings"
)

// codecLevels is a list of compression methods, each with its levels, in
// the order given, e.g. parsed from "gzip=1,5,9 lz4=1,5,12 zstd=1,5,15,22".
// A method without levels ("none", or "zstd" for its default) has one
// entry with level 0.
type codecLevels []methodLevels

type methodLevels struct {
	method string
	levels []int
}

// parseLevels parses space-separated METHOD[=L1,L2,...] items.
func parseLevels(s string) (codecLevels, error) {
	var out codecLevels
	for _, item := range strings.Fields(s) {
		method, list, has := strings.Cut(item, "=")
		switch method {
		case "none", "gzip", "lz4", "zstd":
		default:
			return nil, fmt.Errorf("levels %q: unknown method %q (want none, gzip, lz4 or zstd)", s, method)
		}
		ml := methodLevels{method: method}
		if has {
			for _, l := range strings.Split(list, ",") {
				n, err := strconv.Atoi(l)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("levels %q: bad level %q for %s", s, l, method)
				}
				ml.levels = append(ml.levels, n)
			}
		}
		if len(ml.levels) == 0 {
			ml.levels = []int{0}
		}
		out = append(out, ml)
	}
	return out, nil
}

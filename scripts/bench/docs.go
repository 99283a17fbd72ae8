package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

// replaceBetweenMarkers returns doc with the text between the begin and end
// markers replaced by section, leaving everything outside them as it was.
// Without markers it appends a marked section at the end.
func replaceBetweenMarkers(doc, section string) (string, error) {
	body := beginMarker + "\n" + strings.TrimRight(section, "\n") + "\n" + endMarker + "\n"
	b := strings.Index(doc, beginMarker)
	e := strings.Index(doc, endMarker)
	switch {
	case b < 0 && e < 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + body, nil
	case b < 0 || e < 0 || e < b:
		return "", errors.New("docs: bench markers are unbalanced; fix them by hand")
	}
	if strings.Count(doc, beginMarker) > 1 || strings.Count(doc, endMarker) > 1 {
		return "", errors.New("docs: more than one bench section")
	}
	rest := doc[e+len(endMarker):]
	rest = strings.TrimPrefix(rest, "\n")
	return doc[:b] + body + rest, nil
}

// writeDocs regenerates the marked section of the file at path.
func writeDocs(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc, err := replaceBetweenMarkers(string(old), section)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

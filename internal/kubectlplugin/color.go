package kubectlplugin

import (
	"os"

	"golang.org/x/term"
)

// color is a terminal colour; none leaves the text as it is.
type color int

const (
	none color = iota
	green
	yellow
	red
	bold
)

var ansi = map[color]string{green: "\x1b[32m", yellow: "\x1b[33m", red: "\x1b[31m", bold: "\x1b[1m"}

// palette paints text when enabled; disabled, it returns text unchanged (pipes, files, NO_COLOR, golden files).
type palette struct{ enabled bool }

func (p palette) paint(c color, s string) string {
	if !p.enabled || c == none || s == "" {
		return s
	}
	return ansi[c] + s + "\x1b[0m"
}

// useColor follows https://no-color.org: colour only on a terminal, and never when NO_COLOR is set.
func useColor(out any) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

package kubectlplugin

import (
	"io"
	"strings"
	"unicode/utf8"
)

// cell is one table cell; its colour is applied after padding, so escape codes never skew the columns.
type cell struct {
	text  string
	color color
}

// table renders rows in aligned columns, as kubectl's tables look: two spaces between columns, the last
// column unpadded.
type table struct {
	header []string
	rows   [][]cell
}

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, p palette, indent string) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
		}
	}
	line := func(cells []cell) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range cells {
			b.WriteString(p.paint(c.color, c.text))
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2))
			}
		}
		_, _ = io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
	}
	head := make([]cell, len(t.header))
	for i, h := range t.header {
		head[i] = cell{text: h}
	}
	line(head)
	for _, r := range t.rows {
		line(r)
	}
}

func plain(s string) cell { return cell{text: s} }

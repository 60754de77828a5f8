package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// figuresFloor is the BM25 floor (bm25_baseline.py's recall@k per
// category), as the benchmark's README states it. The floor is a plain BM25
// over turns, not ctxd's own text mode, so it is read rather than measured.
type figuresFloor struct {
	Source string                     `json:"source"`
	Table  map[string]map[int]float64 `json:"table"` // lower-case category -> k -> recall@k (%)
}

// recall is the floor of a category at k; ok is false when the floor does
// not state it.
func (f *figuresFloor) recall(category string, k int) (float64, bool) {
	row, ok := f.Table[strings.ToLower(category)]
	if !ok {
		return 0, false
	}
	v, ok := row[k]
	return v, ok
}

// readFloor reads the first Markdown table under the first heading that
// names the floor: a "category" column and "R@k" columns.
func readFloor(path string) (figuresFloor, error) {
	fl := figuresFloor{Source: path, Table: map[string]map[int]float64{}}
	f, err := os.Open(path)
	if err != nil {
		return fl, fmt.Errorf("--floor: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inSection, inTable := false, false
	catCol, kCols := -1, map[int]int{} // column -> k
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			if inTable {
				break
			}
			inSection = strings.Contains(strings.ToLower(line), "floor")
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the table ended
			}
			continue
		}
		cells := splitMarkdownRow(line)
		switch {
		case !inTable:
			inTable = true
			for i, c := range cells {
				c = strings.ToLower(c)
				if c == "category" {
					catCol = i
				} else if k, err := strconv.Atoi(strings.TrimPrefix(c, "r@")); err == nil && strings.HasPrefix(c, "r@") {
					kCols[i] = k
				}
			}
			if catCol < 0 || len(kCols) == 0 {
				return fl, fmt.Errorf("--floor: %s: the floor table's header %q has no category and R@k columns", path, line)
			}
		case strings.Trim(line, "|-: ") == "":
			// the separator row
		default:
			if catCol >= len(cells) {
				continue
			}
			row := map[int]float64{}
			for i, k := range kCols {
				if i >= len(cells) {
					continue
				}
				v, err := strconv.ParseFloat(cells[i], 64)
				if err != nil {
					return fl, fmt.Errorf("--floor: %s: %q is not a number in row %q", path, cells[i], line)
				}
				row[k] = v
			}
			fl.Table[strings.ToLower(cells[catCol])] = row
		}
	}
	if err := sc.Err(); err != nil {
		return fl, fmt.Errorf("--floor: read %s: %w", path, err)
	}
	if len(fl.Table) == 0 {
		return fl, fmt.Errorf("--floor: %s has no table under a heading that names the floor", path)
	}
	return fl, nil
}

func splitMarkdownRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

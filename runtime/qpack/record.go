package qpack

import (
	"crypto/sha256"
	"fmt"
)

// recordAlign is the alignment of each matrix inside a record and of the
// record size, so that records laid end to end keep every matrix aligned.
const recordAlign = 256

// MatrixLayout locates one matrix inside an expert record.
type MatrixLayout struct {
	Rows       int `json:"rows"`        // out_features
	Cols       int `json:"cols"`        // in_features (unpadded)
	ColsPadded int `json:"cols_padded"` // int4: PaddedCols(Cols); fp16: Cols
	// Offset is the byte offset of the matrix inside the record (a multiple
	// of 256).
	Offset int `json:"offset"`
	// Bytes is the stored size of the matrix without alignment padding:
	// Int4MatrixBytes(Rows, Cols) for int4, Rows*Cols*2 for fp16.
	Bytes int `json:"bytes"`
	// ScalesOffset (int4 only; 0 for fp16) is where the FP16 scales start,
	// relative to Offset: Rows*ColsPadded/2.
	ScalesOffset int `json:"scales_offset"`
}

// RowBytes is the stride of one stored row: ColsPadded/2 for int4 (packed
// nibbles, scales stored separately), Cols*2 for fp16.
func (m MatrixLayout) RowBytes() int {
	if m.ScalesOffset > 0 {
		return m.ColsPadded / 2
	}
	return m.Cols * 2
}

// Blocks is the number of 256-value blocks (scales) a row has in int4.
func (m MatrixLayout) Blocks() int { return m.ColsPadded / BlockSize }

// RecordLayout is the layout of one expert record: gate_proj [ffn, hidden],
// up_proj [ffn, hidden], down_proj [hidden, ffn], each 256-byte aligned.
//
//	0            Up.Offset     Down.Offset            Size
//	+------------+--+----------+--+---------------+---+
//	| gate_proj  |0s| up_proj  |0s| down_proj     |0s |   (0s: zero alignment padding)
//	+------------+--+----------+--+---------------+---+
type RecordLayout struct {
	Scheme Scheme       `json:"scheme"`
	Gate   MatrixLayout `json:"gate_proj"`
	Up     MatrixLayout `json:"up_proj"`
	Down   MatrixLayout `json:"down_proj"`
	// Size is the record size in bytes, a multiple of 256.
	Size int `json:"record_bytes"`
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

func matrixLayout(s Scheme, rows, cols, offset int) MatrixLayout {
	m := MatrixLayout{Rows: rows, Cols: cols, Offset: offset}
	if s == SchemeInt4 {
		m.ColsPadded = PaddedCols(cols)
		m.Bytes = Int4MatrixBytes(rows, cols)
		m.ScalesOffset = rows * m.ColsPadded / 2
	} else {
		m.ColsPadded = cols
		m.Bytes = rows * cols * 2
	}
	return m
}

// NewRecordLayout lays out the expert record of a model with the given hidden
// size and expert FFN width.
func NewRecordLayout(s Scheme, hidden, ffn int) (RecordLayout, error) {
	if !s.Valid() {
		return RecordLayout{}, fmt.Errorf("qpack: unknown scheme %q", s)
	}
	if hidden <= 0 || ffn <= 0 {
		return RecordLayout{}, fmt.Errorf("qpack: record layout: hidden %d and ffn %d must be positive", hidden, ffn)
	}
	l := RecordLayout{Scheme: s}
	l.Gate = matrixLayout(s, ffn, hidden, 0)
	l.Up = matrixLayout(s, ffn, hidden, alignUp(l.Gate.Offset+l.Gate.Bytes, recordAlign))
	l.Down = matrixLayout(s, hidden, ffn, alignUp(l.Up.Offset+l.Up.Bytes, recordAlign))
	l.Size = alignUp(l.Down.Offset+l.Down.Bytes, recordAlign)
	return l, nil
}

// Matrices returns gate, up and down in record order (model.ExpertProjs).
func (l RecordLayout) Matrices() [3]MatrixLayout { return [3]MatrixLayout{l.Gate, l.Up, l.Down} }

// Matrix returns the layout of "gate_proj", "up_proj" or "down_proj".
func (l RecordLayout) Matrix(proj string) (MatrixLayout, bool) {
	switch proj {
	case "gate_proj":
		return l.Gate, true
	case "up_proj":
		return l.Up, true
	case "down_proj":
		return l.Down, true
	}
	return MatrixLayout{}, false
}

// MatrixStats is what encoding one matrix of a record produced.
type MatrixStats struct {
	Quant QuantStats // int4 only
	// Saturated counts values clamped to ±65504 (fp16 only).
	Saturated int64
	// SHA256 is the digest of the matrix's stored bytes (m.Bytes, without
	// alignment padding).
	SHA256 [32]byte
}

// EncodeMatrix stores the row-major matrix w (m.Rows x m.Cols) at m.Offset
// of record in l's scheme. It does not touch the alignment padding.
func (l RecordLayout) EncodeMatrix(record []byte, m MatrixLayout, w []float32) (MatrixStats, error) {
	var ms MatrixStats
	if len(record) < m.Offset+m.Bytes {
		return ms, fmt.Errorf("qpack: record of %d bytes cannot hold a matrix at [%d, %d)", len(record), m.Offset, m.Offset+m.Bytes)
	}
	if len(w) != m.Rows*m.Cols {
		return ms, fmt.Errorf("qpack: %d weights for a [%d, %d] matrix", len(w), m.Rows, m.Cols)
	}
	dst := record[m.Offset : m.Offset+m.Bytes]
	var err error
	switch l.Scheme {
	case SchemeInt4:
		ms.Quant, err = QuantizeMatrix(dst, w, m.Rows, m.Cols)
	case SchemeFP16:
		ms.Saturated, err = EncodeFP16Matrix(dst, w)
		if err != nil {
			err = fmt.Errorf("row %d col %d: %w", firstNonFinite(w)/m.Cols, firstNonFinite(w)%m.Cols, ErrNonFinite)
		}
	default:
		err = fmt.Errorf("qpack: unknown scheme %q", l.Scheme)
	}
	if err != nil {
		return ms, err
	}
	ms.SHA256 = sha256.Sum256(dst)
	return ms, nil
}

// DecodeMatrix writes the float32 values (m.Rows x m.Cols, padding dropped)
// of matrix m of record into dst: dequantised for int4, decoded for fp16.
func (l RecordLayout) DecodeMatrix(dst []float32, record []byte, m MatrixLayout) {
	src := record[m.Offset : m.Offset+m.Bytes]
	if l.Scheme == SchemeInt4 {
		DequantizeMatrix(dst, src, m.Rows, m.Cols)
		return
	}
	DecodeFP16Matrix(dst, src)
}

func firstNonFinite(w []float32) int {
	for i, v := range w {
		if v != v || v > 3.4028235e38 || v < -3.4028235e38 {
			return i
		}
	}
	return 0
}

package ifeval

import "math"

// pyRandom is CPython's random.Random, as far as langdetect uses it: the
// MT19937 generator seeded the way random.seed(n) seeds it for a small
// non-negative int n, random(), getrandbits(k) for k <= 32, choice's
// _randbelow (rejection sampling on n.bit_length() bits, CPython 3.11) and
// gauss (the Box-Muller pair of CPython 3.11, the second value kept for the
// next call). The generator is the reference algorithm of Matsumoto and
// Nishimura (1998, init_by_array of 2002), which CPython's _randommodule.c
// also implements; pyrandom_test.go pins its output to CPython's.
type pyRandom struct {
	mt        [mtN]uint32
	mti       int
	gaussNext float64
	haveGauss bool
}

const (
	mtN       = 624
	mtM       = 397
	mtMatrixA = 0x9908b0df
	mtUpper   = 0x80000000
	mtLower   = 0x7fffffff
)

// newPyRandom is random.Random(seed) for 0 <= seed < 2^32: CPython splits
// the int into 32-bit words, one word here (also for 0), and calls
// init_by_array with them.
func newPyRandom(seed uint32) *pyRandom {
	r := &pyRandom{}
	r.initByArray([]uint32{seed})
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000 // the most significant bit is 1: a non-zero initial array
}

// uint32 is genrand_uint32: the next tempered 32-bit output.
func (r *pyRandom) uint32() uint32 {
	mag := [2]uint32{0, mtMatrixA}
	if r.mti >= mtN {
		kk := 0
		for ; kk < mtN-mtM; kk++ {
			y := (r.mt[kk] & mtUpper) | (r.mt[kk+1] & mtLower)
			r.mt[kk] = r.mt[kk+mtM] ^ (y >> 1) ^ mag[y&1]
		}
		for ; kk < mtN-1; kk++ {
			y := (r.mt[kk] & mtUpper) | (r.mt[kk+1] & mtLower)
			r.mt[kk] = r.mt[kk+(mtM-mtN)] ^ (y >> 1) ^ mag[y&1]
		}
		y := (r.mt[mtN-1] & mtUpper) | (r.mt[0] & mtLower)
		r.mt[mtN-1] = r.mt[mtM-1] ^ (y >> 1) ^ mag[y&1]
		r.mti = 0
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// random is random.random(): 53 bits from two outputs, in [0, 1).
func (r *pyRandom) random() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return float64(float64(a)*67108864.0+float64(b)) * (1.0 / 9007199254740992.0)
}

// getrandbits is random.getrandbits(k) for 1 <= k <= 32.
func (r *pyRandom) getrandbits(k int) uint32 {
	return r.uint32() >> (32 - k)
}

// randbelow is Random._randbelow_with_getrandbits(n) for 1 <= n < 2^32,
// the index random.choice draws from a sequence of length n.
func (r *pyRandom) randbelow(n int) int {
	k := 0
	for v := n; v > 0; v >>= 1 {
		k++
	}
	x := int(r.getrandbits(k))
	for x >= n {
		x = int(r.getrandbits(k))
	}
	return x
}

// gauss is random.gauss(0.0, 1.0). CPython's math functions are the C
// library's; Go's Log, Cos and Sin may differ from them in the last bit for
// some inputs (pyrandom_test.go checks the values langdetect's seed draws).
func (r *pyRandom) gauss() float64 {
	if r.haveGauss {
		r.haveGauss = false
		return r.gaussNext
	}
	x2pi := float64(r.random() * (2 * math.Pi))
	g2rad := math.Sqrt(float64(-2.0 * math.Log(1.0-r.random())))
	r.gaussNext, r.haveGauss = float64(math.Sin(x2pi)*g2rad), true
	return float64(math.Cos(x2pi) * g2rad)
}

// matmul_tc.cu: the batched projections of prefill on the tensor cores
// (runtime/cuda batched.go, the default for batched prefill; tuning.noMatmulTC
// keeps the row kernels instead):
//
//	y[yrow(t)][r] = M[r] · x[xrow(t)] (+ bias[r])   for t < T, r < rows
//
// with M an FP16 matrix (matmul_tc_f16) or a qpack-int4-b256-v1 expert
// matrix (matmul_tc_w4a16), xrow/yrow index arrays or the identity (null),
// as matmul.cu's kernels. Unlike them the results are not the per-token row
// kernels' bits: the products run as mma.sync m16n8k16 (FP16 inputs, FP32
// accumulation) in another order. Each output is still a function of its
// own token's activations and the matrix alone (an mma row never mixes with
// another), so a token's results do not depend on which tokens share its
// batch, expert wave or tile: capacity, executor and step mode cannot
// change them.
//
// Activations are FP32. Each 32-value chunk of a token's row is scaled by a
// power of two 2^s (s from the chunk's largest magnitude, so the scaled
// values lie below 2^15) and split into two FP16 parts, hi = fp16(v·2^s)
// and lo = fp16(v·2^s - hi): about 22 significant bits, no overflow, and
// the scaling is exact. The chunk's products of hi and of lo with the
// matrix accumulate in FP32 in the tensor cores, then the chunk's sum is
// scaled back by 2^-s (exact) and added to the output's FP32 accumulator;
// an int4 matrix enters as its integer codes u - 8 (exact in FP16) and each
// chunk's sum is multiplied by its 256-value block's scale, as
// w' = (u - 8)·s defines it. So the error is of the order of FP32 rounding
// of the chunk sums, far inside the HF oracle's tolerance.
//
// Launch: 256 threads (8 warps); block b is (row tile b / G, token group
// b % G), G = ceil(T / 64), so blocks that run together read one weight
// tile. The grouped kernels (end of file) run several experts' matrices in
// one launch through a table of (matrix, pairs) entries. A block owns 64 tokens x 128 rows (the
// activations' staging, the costliest part of a chunk, is shared by twice
// the rows of the first version: the same products, the same bits); warp w
// computes tokens 32*(w&1).. x rows 32*(w>>1).. as 2 x 4 m16n8 tiles. Per 32-value chunk
// the block stages the tokens' hi and lo parts and the matrix's 64 x 32
// values in shared memory (rows padded to 40 halves: the fragment loads hit
// 32 distinct banks), then each warp issues 2 (k16) x 2 (hi, lo) x 8 mma.
// Dynamic shared memory: TC_SMEM bytes.
#include "common.cuh"
#include "tc.cuh"

#define TC_BM 64                // tokens a block
#define TC_BN 128               // matrix rows a block
#define TC_BK 32                // values of a row a chunk
#define TC_LD 40                // halves a staged row (32 + 8 padding)
#define TC_THREADS 256
// Shared memory: two pipeline stages of TC_STAGE bytes (below).
#define TC_SMEM (2 * ((2 * TC_BM + TC_BN) * TC_LD * 2 + (TC_BM + TC_BN) * 4))

extern __shared__ __align__(16) float xs_smem[];

// TcRaw is one chunk's global loads of one thread, held in registers while
// the block computes the chunk before it: the thread's 8 activations of
// its token (sm, quarter hh) and its part of the matrix tile (int4: 8 bytes
// of row tc_int4_row(tid) and that row's block scale; FP16: two 8-value
// segments).
struct TcRaw {
	float v[8];
	uint4 xh, xl;  // pre-split activations (PRE): 8 hi and 8 lo halves
	float xinv;    // and the chunk's 2^-s
	uint2 w4;
	float sc;
	uint4 wf[2];
};

// TcSplitX locates activations split ahead of the matmul (tc_split_rows):
// row i's hi and lo halves at hi/lo + i * ld (ld = chunks * 32, zero past
// cols) and its chunks' 2^-s at inv + i * chunks.
struct TcSplitX {
	const __half* hi;
	const __half* lo;
	const float* inv;
};

// The shared memory of one pipeline stage: hi, lo [TC_BM][TC_LD] halves,
// the matrix [TC_BN][TC_LD] halves, then 2^-s per token and the block scale
// per row (floats). Two stages (TC_SMEM).
#define TC_STAGE ((2 * TC_BM + TC_BN) * TC_LD * 2 + (TC_BM + TC_BN) * 4)
// Chunks a 256-value int4 block scale covers.
#define TC_SCALE_CHUNKS (256 / TC_BK)

// Which staged row a thread fills. Staged rows are TC_LD = 40 halves (20
// banks) apart, and a 16-byte shared store is served a quarter warp (8
// threads) at a time, so the 8 threads' 128 bytes must fall in 32 distinct
// banks. In row order they do not: rows r and r + 1 are 20 banks apart and
// their 16-byte pieces overlap (2 wavefronts instead of 1; Nsight Compute,
// results/h200-s21: 37% of the grouped kernel's shared wavefronts were such
// excess). Rows 4 apart are 80 banks = 16 (mod 32) apart, so:
//
// tc_quad_row is the row of four-thread group i (an activation token's
// hi/lo halves, or an FP16 matrix row: 4 x 16 bytes): i with bits 0 and 2
// swapped, so a quarter warp's two rows are 4 apart (banks 0-15 and 16-31).
__device__ __forceinline__ int tc_quad_row(int i) { return (i & ~5) | ((i & 1) << 2) | ((i >> 2) & 1); }
// tc_int4_row is the matrix row whose int4 codes thread tid copies and
// stages (two threads a row, 16 halves = 32 bytes each, as two 16-byte
// stores): tid / 2 with bits 1 and 2 swapped, so a quarter warp's 4 rows
// are {0, 1, 4, 5} or {2, 3, 6, 7} (mod 8), whose 8 pieces of each store
// hit 32 distinct banks. The rows a warp reads from global memory are the
// same 16 either way.
__device__ __forceinline__ int tc_int4_row(int tid) {
	const int r = tid >> 1;
	return (r & ~6) | ((r & 2) << 1) | ((r >> 1) & 2);
}

template <bool INT4, bool PRE, bool WEIGHTS = true>
__device__ __forceinline__ void tc_load(TcRaw& r, const float* xr, bool x4, int xi, const TcSplitX& sx,
                                        const uint8_t* __restrict__ mat, int rows, int cols, int cols_padded, int scales_offset,
                                        int n0, int c, int tid, int hh) {
	const int k0 = c * TC_BK + hh * 8;
	if (PRE) {
		const int nck = (cols + TC_BK - 1) / TC_BK;
		r.xh = r.xl = make_uint4(0u, 0u, 0u, 0u);
		r.xinv = tc_pow2(-126);  // a padding token's (its outputs are never written)
		if (xi >= 0) {
			const size_t at = (size_t)xi * nck * TC_BK + k0;
			r.xh = *reinterpret_cast<const uint4*>(sx.hi + at);
			r.xl = *reinterpret_cast<const uint4*>(sx.lo + at);
			r.xinv = sx.inv[(size_t)xi * nck + c];
		}
	} else if (x4 && k0 + 8 <= cols) {
#pragma unroll
		for (int j = 0; j < 2; j++) {
			const float4 f = act_ldg(reinterpret_cast<const float4*>(xr + k0) + j);
			r.v[4 * j] = f.x, r.v[4 * j + 1] = f.y, r.v[4 * j + 2] = f.z, r.v[4 * j + 3] = f.w;
		}
	} else {
#pragma unroll
		for (int j = 0; j < 8; j++) r.v[j] = xr != nullptr && k0 + j < cols ? act_ldg(xr + k0 + j) : 0.0f;
	}
	if (!WEIGHTS) {
		// The matrix's chunk comes from the cp.async ring (tc_ring_take).
	} else if (INT4) {
		const int row = n0 + tc_int4_row(tid);
		r.w4 = make_uint2(0x88888888u, 0x88888888u);  // codes 8: zero
		r.sc = 0.0f;
		if (row < rows) {
			r.w4 = *reinterpret_cast<const uint2*>(mat + (size_t)row * (cols_padded >> 1) + (size_t)c * 16 + (tid & 1) * 8);
			r.sc = __half2float(__ldg(reinterpret_cast<const __half*>(mat + scales_offset) + (size_t)row * (cols_padded >> 8) +
			                          (c * TC_BK >> 8)));
		}
	} else {
		const __half* W = reinterpret_cast<const __half*>(mat);
		const bool w8 = (cols & 7) == 0 && (reinterpret_cast<uintptr_t>(mat) & 15) == 0;
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int idx = tid + TC_THREADS * u, rr = tc_quad_row(idx >> 2), seg = idx & 3;
			const int row = n0 + rr, kk = c * TC_BK + seg * 8;
			uint4 w = make_uint4(0u, 0u, 0u, 0u);
			if (row < rows) {
				if (w8 && kk + 8 <= cols) {
					w = ldg_stream(W + (size_t)row * cols + kk);
				} else {
					__half h[8];
#pragma unroll
					for (int j = 0; j < 8; j++) h[j] = kk + j < cols ? __ldg(W + (size_t)row * cols + kk + j) : __float2half_rn(0.0f);
					w = make_uint4(tc_pack(h[0], h[1]), tc_pack(h[2], h[3]), tc_pack(h[4], h[5]), tc_pack(h[6], h[7]));
				}
			}
			r.wf[u] = w;
		}
	}
}

// tc_store converts a chunk's loads into a stage: each token's chunk split
// into hi and lo at its shift (the four threads of a token are
// neighbouring lanes), the matrix's values as FP16. With xstage false the
// token's halves are not staged: the ring kernels pass that for a token
// whose m16 tile holds padding tokens alone, which tc_chunk never reads.
template <bool INT4, bool PRE>
__device__ __forceinline__ void tc_store(uint8_t* st, const TcRaw& r, int tid, int sm, int hh, bool xstage = true) {
	__half* ah = reinterpret_cast<__half*>(st);
	__half* al = ah + TC_BM * TC_LD;
	__half* bs = al + TC_BM * TC_LD;
	float* inv = reinterpret_cast<float*>(bs + TC_BN * TC_LD);
	float* wsc = inv + TC_BM;
	uint4* hrow = reinterpret_cast<uint4*>(ah + sm * TC_LD + hh * 8);
	uint4* lrow = reinterpret_cast<uint4*>(al + sm * TC_LD + hh * 8);
	if (!xstage) {
		// A padding tile's token: nothing reads its halves.
	} else if (PRE) {
		*hrow = r.xh;
		*lrow = r.xl;
		if (hh == 0) inv[sm] = r.xinv;
	} else {
		unsigned h[4], l[4];
		const int s = tc_split8(r.v, h, l);
		*hrow = make_uint4(h[0], h[1], h[2], h[3]);
		*lrow = make_uint4(l[0], l[1], l[2], l[3]);
		if (hh == 0) inv[sm] = tc_pow2(-s);
	}
	if (INT4) {
		// Word j of the row's chunk (values 8j..8j+7; this thread has words
		// 2(tid&1) and 2(tid&1)+1): byte p holds value 8j+2p in its low
		// nibble and 8j+2p+1 in its high one. Each word becomes 8 halves,
		// one 16-byte store.
		const int br = tc_int4_row(tid);
		uint4* brow = reinterpret_cast<uint4*>(bs + br * TC_LD) + 2 * (tid & 1);
		const unsigned wv[2] = {r.w4.x, r.w4.y};
#pragma unroll
		for (int j = 0; j < 2; j++) brow[j] = make_uint4(tc_codes(wv[j], 0), tc_codes(wv[j], 1), tc_codes(wv[j], 2), tc_codes(wv[j], 3));
		if ((tid & 1) == 0) wsc[br] = r.sc;
	} else {
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int idx = tid + TC_THREADS * u, rr = tc_quad_row(idx >> 2), seg = idx & 3;
			*reinterpret_cast<uint4*>(bs + rr * TC_LD + seg * 8) = r.wf[u];
		}
	}
}

// The cp.async ring of an int4 matrix's chunks (the default for int4;
// tuning.tcNoRing), after the two stages: RING / 2 pair slots, each holding
// two neighbouring chunks 2p, 2p + 1 of the tile's rows. A row's codes of a
// pair are one 32-byte sector: its even thread copies chunk 2p's 16 bytes
// and its odd thread chunk 2p + 1's, as one 16-byte cp.async each (L2
// only), and the two threads swap halves with a shuffle (tc_ring_take), so
// that each holds the 8 bytes tc_load would have read of each chunk. (One
// 8-byte copy a chunk used half of each 32-byte sector, the other half
// fetched again through L1 the next chunk.) After the codes, TC_BN scale
// words (the aligned 4 bytes holding a row's block scale, copied by the
// row's even thread at the first chunk of each 256-value block only: the
// scale is kept in a register for the block's other 7 chunks, where a copy
// every chunk was a 32-byte sector fetched for 2 bytes). Every thread reads
// back only what it copied itself, so the ring needs no barrier:
// cp.async.wait_group orders a thread's own copies, and the slot a thread
// refills was read by it an iteration earlier. The
// values are tc_load's, so the bits are the two-stage kernel's; what
// changes is that about RING - 1 chunks of the matrix (not one) are in
// flight for every thread while the block computes. The ring kernels also skip a
// warp's m16 tiles that hold padding tokens alone (a grouped entry of ~7
// pairs leaves 3 of a warp pair's 4 tiles idle; the tile's rows never
// reach y, and an mma row never mixes with another, so the bits stay);
// since session 32 the two-stage kernels skip them too (a 16-token
// split-K block computed 4 m16 tiles for 1 of tokens), staging them still.
// These kernels hold ~120 registers
// a thread, so 2 blocks share an SM (264 on an H200): one chunk a block is
// ~0.5 MB in flight on the GPU, 11 are ~5.8 MB, about what 4.26 TB/s at
// ~1.5 µs of latency needs. 30 KB are reserved for 12 one-chunk slots,
// 72.5 KB a block in all; the 6 pair slots use 27 KB of it.
#define TC_RING 12
#define TC_RING_SLOT (TC_THREADS * 8 + TC_BN * 4)
#define TC_SMEM_RING (TC_SMEM + TC_RING * TC_RING_SLOT)
// A pair slot: TC_THREADS x 16 bytes of codes, then TC_BN scale words.
// RING / 2 of them fit where RING slots of one chunk were reserved (the
// launches' shared memory sizes, runtime/cuda tcSmemRing, are unchanged).
#define TC_RING_PSLOT (TC_THREADS * 16 + TC_BN * 4)
static_assert(TC_RING % 2 == 0 && (TC_RING / 2) * TC_RING_PSLOT <= TC_RING * TC_RING_SLOT, "pair slots fit the ring");
// The grouped int4 ring kernels with two chunks a stage (_ring2, SUB 2):
// two stages of two chunks (85 KB) and 10 slots (25 KB), 108 KB a block,
// still 2 blocks an SM.
#define TC_RING2 10
#define TC_SMEM_RING2 (2 * TC_SMEM + TC_RING2 * TC_RING_SLOT)
// FP16 matrices (the dense projections): a chunk is 128 rows x 32 halves,
// 8 KB, two 16-byte segments a thread (as tc_load reads them), so 6 slots
// (48 KB; 90.5 KB a block, still 2 blocks an SM): 5 chunks in flight, all
// of a short split-K block's share at once.
#define TC_RING_F16 6
#define TC_RING_SLOT_F16 (TC_THREADS * 32)
#define TC_SMEM_RING_F16 (TC_SMEM + TC_RING_F16 * TC_RING_SLOT_F16)

// tc_f16_seg locates segment u (0, 1) of this thread's part of an FP16
// chunk c: row n0 + idx/4, values kk.. kk+7 with idx = tid + 256u, as
// tc_load reads them; fast when it is a whole aligned 16-byte segment.
struct TcF16Seg {
	int row, kk;
	bool fast;
};
__device__ __forceinline__ TcF16Seg tc_f16_seg(const uint8_t* mat, int rows, int cols, int n0, int c, int tid, int u) {
	const int idx = tid + TC_THREADS * u;
	const int row = n0 + tc_quad_row(idx >> 2), kk = c * TC_BK + (idx & 3) * 8;
	const bool w8 = (cols & 7) == 0 && (reinterpret_cast<uintptr_t>(mat) & 15) == 0;
	return TcF16Seg{row, kk, row < rows && w8 && kk + 8 <= cols};
}

// tc_ring_put starts chunk c's copies of this thread (int4: pair c / 2's,
// at an even c or c0, into pair slot (c / 2) % (RING / 2); FP16: into slot
// c % RING) and closes a group (an empty one at an odd int4 chunk, past the
// last chunk or the last row, so that every thread counts the same groups). FP16 segments that are not a
// whole aligned 16 bytes are not copied: tc_ring_take loads them as
// tc_load does.
template <bool INT4, int RING>
__device__ __forceinline__ void tc_ring_put(uint8_t* ring, const uint8_t* __restrict__ mat, int rows, int cols,
                                            int cols_padded, int scales_offset, int n0, int c, int c0, int nck, int tid) {
	if (c < nck) {
		if (INT4) {
			// The pair p = c / 2 is copied at its even chunk (or at c0, the
			// block's first chunk; pair (c0 - 1, c0) when c0 is odd). A row
			// holds cols_padded / 32 chunks, a multiple of 8, so chunk 2p + 1
			// lies inside the row even past nck.
			const int row = n0 + tc_int4_row(tid);
			if (row < rows && ((c & 1) == 0 || c == c0)) {
				const int pr = c >> 1;
				uint8_t* slot = ring + (pr % (RING / 2)) * TC_RING_PSLOT;
				const uint8_t* src = mat + (size_t)row * (cols_padded >> 1) + (size_t)pr * 32 + (tid & 1) * 16;
				if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
					cp_async16(slot + tid * 16, src);
				} else {
					cp_async8(slot + tid * 16, src);
					cp_async8(slot + tid * 16 + 8, src + 8);
				}
				// The block scale once a 256-value block (its first chunk, or
				// the block's first chunk c0): tc_ring_take keeps it.
				if ((tid & 1) == 0 && (c == c0 || c % TC_SCALE_CHUNKS == 0)) {
					const uintptr_t a = reinterpret_cast<uintptr_t>(mat + scales_offset) +
					                    2 * ((size_t)row * (cols_padded >> 8) + (c * TC_BK >> 8));
					cp_async4(slot + TC_THREADS * 16 + (tid >> 1) * 4, reinterpret_cast<const void*>(a & ~(uintptr_t)3));
				}
			}
		} else {
			uint8_t* slot = ring + (c % RING) * TC_RING_SLOT_F16;
			const __half* W = reinterpret_cast<const __half*>(mat);
#pragma unroll
			for (int u = 0; u < 2; u++) {
				const TcF16Seg sg = tc_f16_seg(mat, rows, cols, n0, c, tid, u);
				if (sg.fast) cp_async16(slot + (tid + TC_THREADS * u) * 16, W + (size_t)sg.row * cols + sg.kk);
			}
		}
	}
	cp_async_commit();
}

// tc_ring_take waits for chunk c's copies of this thread (with SUB chunks
// taken an iteration, for the iteration's last: RING - 2 SUB later groups
// may stay in flight) and puts them in r as tc_load would have (int4: codes 8 and scale 0 past the last row;
// FP16: zeros past the last row or column).
template <bool INT4, int RING, int SUB = 1>
__device__ __forceinline__ void tc_ring_take(TcRaw& r, float& sc, uint2& odd, const uint8_t* ring,
                                             const uint8_t* __restrict__ mat, int rows, int cols, int cols_padded,
                                             int scales_offset, int n0, int c, int c0, int tid) {
	cp_async_wait<RING - 2 * SUB>();
	if (INT4) {
		const int row = n0 + tc_int4_row(tid);
		const uint8_t* slot = ring + ((c >> 1) % (RING / 2)) * TC_RING_PSLOT;
		if ((c & 1) == 0 || c == c0) {
			// A new pair: this thread copied chunk 2p + (tid & 1) of its row
			// (codes 8 past the last row); the even thread keeps bytes 0..7
			// of chunk 2p and gets bytes 0..7 of chunk 2p + 1 from the odd
			// one, which keeps bytes 8..15 of chunk 2p + 1 and gets bytes
			// 8..15 of chunk 2p. Every lane takes part (c is uniform).
			uint4 own = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);
			if (row < rows) own = *reinterpret_cast<const uint4*>(slot + tid * 16);
			const bool hi = (tid & 1) != 0;
			const unsigned s0 = hi ? own.x : own.z, s1 = hi ? own.y : own.w;
			const uint2 got = make_uint2((unsigned)__shfl_xor_sync(0xffffffffu, (int)s0, 1),
			                             (unsigned)__shfl_xor_sync(0xffffffffu, (int)s1, 1));
			const uint2 even = hi ? got : make_uint2(own.x, own.y);
			odd = hi ? make_uint2(own.z, own.w) : got;  // kept for chunk 2p + 1
			r.w4 = (c & 1) == 0 ? even : odd;
		} else {
			r.w4 = odd;
		}
		r.sc = 0.0f;
		if (row < rows) {
			if ((tid & 1) == 0 && (c == c0 || c % TC_SCALE_CHUNKS == 0)) {
				const uintptr_t a = reinterpret_cast<uintptr_t>(mat + scales_offset) +
				                    2 * ((size_t)row * (cols_padded >> 8) + (c * TC_BK >> 8));
				// The scale is the copied word's half at the address's own offset.
				sc = __half2float(*reinterpret_cast<const __half*>(slot + TC_THREADS * 16 + (tid >> 1) * 4 + (a & 2)));
			}
			r.sc = sc;  // the block scale copied at its first chunk (chunks are taken in order)
		}
	} else {
		const uint8_t* slot = ring + (c % RING) * TC_RING_SLOT_F16;
		const __half* W = reinterpret_cast<const __half*>(mat);
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const TcF16Seg sg = tc_f16_seg(mat, rows, cols, n0, c, tid, u);
			uint4 w = make_uint4(0u, 0u, 0u, 0u);
			if (sg.fast) {
				w = *reinterpret_cast<const uint4*>(slot + (tid + TC_THREADS * u) * 16);
			} else if (sg.row < rows) {
				__half h[8];
#pragma unroll
				for (int j = 0; j < 8; j++)
					h[j] = sg.kk + j < cols ? __ldg(W + (size_t)sg.row * cols + sg.kk + j) : __float2half_rn(0.0f);
				w = make_uint4(tc_pack(h[0], h[1]), tc_pack(h[2], h[3]), tc_pack(h[4], h[5]), tc_pack(h[6], h[7]));
			}
			r.wf[u] = w;
		}
	}
}

// tc_chunk adds one staged chunk's products to a warp's accumulators: the
// hi and lo parts of each m16 tile (tokens) against each n8 tile (rows),
// the chunk's sums from zero, then back to the activations' scale (exact)
// and times the block scale for int4. SKIP leaves out the m16 tiles that
// hold padding tokens alone (their rows never reach y, and an mma row never
// mixes with another, so the bits stay). NI is the warp's n8 tiles (4,
// or 2 in the narrow mapping). LO false (the FP16-activation build) takes
// the hi parts alone.
template <bool INT4, bool SKIP, int NI = 4, bool LO = true>
__device__ __forceinline__ void tc_chunk(float (&acc)[2][NI][4], const uint8_t* st, int wm, int wn, int g, int q, int t0,
                                         int T) {
	const __half* ah = reinterpret_cast<const __half*>(st);
	const __half* al = ah + TC_BM * TC_LD;
	const __half* bs = al + TC_BM * TC_LD;
	const float* inv = reinterpret_cast<const float*>(bs + TC_BN * TC_LD);
	const float* wsc = inv + TC_BM;
	// A warp whose m16 tiles all hold padding tokens alone loads nothing
	// (at <= 32 pairs an entry, the 4 warps of tokens 32..63).
	if (SKIP && t0 + wm >= T) return;

	// The chunk's sums: hi and lo of each m16 tile against each n8 tile
	// (the first mma of each starts from zero).
	// Fragments with ldmatrix_x4 (one instruction for what took four 4-byte
	// loads): lane l addresses A row l % 16, column 8 (l / 16) of an m16
	// tile, and B (rows n, k contiguous) row 8 ((l / 16) & 1) + l % 8,
	// column 8 ((l / 8) & 1) of an n8 pair: b0, b1 of n8 tile ni, then of
	// ni + 1. The same words in the same registers as the loads before.
	const int lane = 4 * g + q;
	const __half* al_lane = ah + (wm + (lane & 15)) * TC_LD + 8 * (lane >> 4);
	const __half* bl_lane = bs + (wn + 8 * ((lane >> 4) & 1) + (lane & 7)) * TC_LD + 8 * ((lane >> 3) & 1);
	static_assert(NI % 2 == 0, "n8 tiles in pairs");
	float part[2][NI][4];
#pragma unroll
	for (int ks = 0; ks < TC_BK; ks += 16) {
		unsigned bf[NI][2];
#pragma unroll
		for (int ni = 0; ni < NI; ni += 2) {
			unsigned b4[4];
			ldmatrix_x4(b4, tc_shared_addr(bl_lane + 8 * ni * TC_LD + ks));
			bf[ni][0] = b4[0], bf[ni][1] = b4[1], bf[ni + 1][0] = b4[2], bf[ni + 1][1] = b4[3];
		}
#pragma unroll
		for (int mi = 0; mi < 2; mi++) {
			if (SKIP && t0 + wm + 16 * mi >= T) continue;  // an m16 tile of padding tokens alone
#pragma unroll
			for (int part_i = 0; part_i < (LO ? 2 : 1); part_i++) {
				unsigned af[4];
				ldmatrix_x4(af, tc_shared_addr(al_lane + (part_i * TC_BM + 16 * mi) * TC_LD + ks));
#pragma unroll
				for (int ni = 0; ni < NI; ni++) {
					if (ks == 0 && part_i == 0)
						mma_16816_z(part[mi][ni], af, bf[ni]);
					else
						mma_16816(part[mi][ni], af, bf[ni]);
				}
			}
		}
	}
	// Back to the activations' scale (exact), times the block scale for
	// int4, into the accumulators.
#pragma unroll
	for (int mi = 0; mi < 2; mi++) {
		if (SKIP && t0 + wm + 16 * mi >= T) continue;
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int m = wm + 16 * mi + g + (e >> 1) * 8, n = wn + 8 * ni + 2 * q + (e & 1);
				const float f = __fmul_rn(part[mi][ni][e], inv[m]);
				acc[mi][ni][e] = INT4 ? __fmaf_rn(f, wsc[n], acc[mi][ni][e]) : __fadd_rn(acc[mi][ni][e], f);
			}
	}
}

// tc_write stores a warp's accumulators: y[yrow(t)][r] (+ bias[r]) for
// its tokens t < T and rows r < rows.
template <int NI = 4>
__device__ __forceinline__ void tc_write(float* __restrict__ y, const float (&acc)[2][NI][4], const void* __restrict__ bias,
                                         int bias_kind, int rows, int T, const int* __restrict__ yrows, int t0, int n0, int wm,
                                         int wn, int g, int q) {
#pragma unroll
	for (int mi = 0; mi < 2; mi++)
#pragma unroll
		for (int e2 = 0; e2 < 2; e2++) {
			const int t = t0 + wm + 16 * mi + g + e2 * 8;
			if (t >= T) continue;
			float* yr = y + (size_t)(yrows != nullptr ? yrows[t] : t) * rows;
#pragma unroll
			for (int ni = 0; ni < NI; ni++)
#pragma unroll
				for (int e1 = 0; e1 < 2; e1++) {
					const int r = n0 + wn + 8 * ni + 2 * q + e1;
					if (r >= rows) continue;
					float v = acc[mi][ni][e2 * 2 + e1];
					if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, r));
					yr[r] = v;
				}
		}
}

// matmul_tc_body runs a block's chunks as a two-stage pipeline: the
// global loads of chunk c+1 are in flight (TcRaw, registers) while the
// warps issue chunk c's mma from the other stage, and one barrier a chunk
// orders both (the stage a thread writes was last read two chunks back,
// before every thread reached the previous barrier). The arithmetic and
// its order are the one-stage kernel's, so are the bits.
//
// With SUB > 1 (ring kernels only) a stage holds SUB chunks: an iteration
// takes SUB chunks from the ring, stages them, passes one barrier and
// computes them in chunk order, so the loop's fixed latency (ring wait,
// staging, barrier, activation loads one iteration ahead, the mma chains)
// is paid once for SUB chunks. The same arithmetic in the same order: the
// same bits.
//
// NARROW (ring kernels only) maps the 8 warps onto a block's first 32
// tokens alone: warp w computes rows 16w.. (2 n8 tiles) for tokens 0..31
// (2 m16 tiles, the second skipped below 17 tokens), where the default
// mapping leaves the 4 warps of tokens 32..63 idle at a short entry's ~7
// pairs and gives the other 4 twice the mma chains. A block must hold at
// most 32 tokens (runtime/cuda tcGroupedNarrow: every entry of the launch).
// Each output's products and their order are the default mapping's: the
// same bits.
template <bool INT4, bool PRE = false, int RING = 0, int SUB = 1, bool NARROW = false, bool LO = true>
__device__ __forceinline__ void matmul_tc_body(float* __restrict__ y, const uint8_t* __restrict__ mat,
                                               const float* __restrict__ x, const void* __restrict__ bias, int bias_kind,
                                               int rows, int cols, int cols_padded, int scales_offset, int T,
                                               const int* __restrict__ xrows, const int* __restrict__ yrows, int t0, int n0,
                                               int c0 = 0, int c1 = 1 << 30, TcSplitX sx = TcSplitX{nullptr, nullptr, nullptr}) {
	static_assert(SUB == 1 || RING != 0, "chunks a stage > 1 needs the ring");
	static_assert(RING == 0 || RING >= 2 * SUB, "the ring holds at least two iterations' chunks");
	static_assert(!NARROW || RING != 0, "the narrow mapping needs the ring kernels' tile skip");
	constexpr int NI = NARROW ? 2 : 4;
	uint8_t* smem = reinterpret_cast<uint8_t*>(xs_smem);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
	const int wm = NARROW ? 0 : (warp & 1) * 32, wn = NARROW ? warp * 16 : (warp >> 1) * 32;

	// The token this thread stages (8 values of each chunk: quarter hh).
	const int sm = tc_quad_row(tid >> 2), hh = tid & 3;
	// The ring kernels skip m16 tiles of padding tokens alone (tc_chunk), so
	// they need not stage those tokens either.
	const bool xstage = RING == 0 || t0 + (sm & ~15) < T;
	const int xi = t0 + sm < T ? (xrows != nullptr ? xrows[t0 + sm] : t0 + sm) : -1;  // its activation row
	const float* xr = !PRE && xi >= 0 ? x + (size_t)xi * cols : nullptr;
	const bool x4 = xr != nullptr && (cols & 3) == 0 && (reinterpret_cast<uintptr_t>(xr) & 15) == 0;

	float acc[2][NI][4];
#pragma unroll
	for (int mi = 0; mi < 2; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

	// Chunks [c0, nck) of the row (a split-K block's share; all of it by
	// default).
	const int nck = min((cols + TC_BK - 1) / TC_BK, c1);
	TcRaw raw[SUB];
	float sc = 0.0f;  // the ring's current int4 block scale (tc_ring_take)
	uint2 odd = make_uint2(0u, 0u);  // the ring's int4 codes of a pair's odd chunk (tc_ring_take)
	// With a ring the matrix's chunks c0 .. c0 + RING - SUB - 1 are put in
	// flight first; tc_load then reads the activations alone.
	constexpr bool W = RING == 0;
	uint8_t* ring = smem + 2 * SUB * TC_STAGE;
	if constexpr (RING != 0)
		for (int c = c0; c < c0 + RING - SUB; c++)
			tc_ring_put<INT4, RING>(ring, mat, rows, cols, cols_padded, scales_offset, n0, c, c0, nck, tid);
#pragma unroll
	for (int s = 0; s < SUB; s++)
		if (c0 + s < nck) tc_load<INT4, PRE, W>(raw[s], xr, x4, xi, sx, mat, rows, cols, cols_padded, scales_offset, n0, c0 + s, tid, hh);
	for (int c = c0, it = 0; c < nck; c += SUB, it++) {
		uint8_t* st = smem + (it & 1) * SUB * TC_STAGE;
		if constexpr (RING != 0) {
#pragma unroll
			for (int s = 0; s < SUB; s++)
				if (c + s < nck)
					tc_ring_take<INT4, RING, SUB>(raw[s], sc, odd, ring, mat, rows, cols, cols_padded, scales_offset, n0, c + s, c0,
					                              tid);
#pragma unroll
			for (int s = 0; s < SUB; s++)
				tc_ring_put<INT4, RING>(ring, mat, rows, cols, cols_padded, scales_offset, n0, c + RING - SUB + s, c0, nck, tid);
		}
#pragma unroll
		for (int s = 0; s < SUB; s++)
			if (c + s < nck) tc_store<INT4, PRE>(st + s * TC_STAGE, raw[s], tid, sm, hh, xstage);
		__syncthreads();
#pragma unroll
		for (int s = 0; s < SUB; s++)
			if (c + SUB + s < nck)
				tc_load<INT4, PRE, W>(raw[s], xr, x4, xi, sx, mat, rows, cols, cols_padded, scales_offset, n0, c + SUB + s, tid, hh);
#pragma unroll
		for (int s = 0; s < SUB; s++)
			if (c + s < nck) tc_chunk<INT4, true, NI, LO>(acc, st + s * TC_STAGE, wm, wn, g, q, t0, T);
	}
	tc_write<NI>(y, acc, bias, bias_kind, rows, T, yrows, t0, n0, wm, wn, g, q);
}

#define MATMUL_TC(NAME, INT4)                                                                                         \
	extern "C" __global__ void __launch_bounds__(TC_THREADS)                                                            \
	    NAME(float* y, const uint8_t* mat, const float* x, const void* bias, int bias_kind, int rows, int cols,          \
	         int cols_padded, int scales_offset, int T, const int* xrows, const int* yrows) {                           \
		grid_dep_enter();                                                                                             \
		const int G = (T + TC_BM - 1) / TC_BM;                                                                        \
		matmul_tc_body<INT4>(y, mat, x, bias, bias_kind, rows, cols, cols_padded, scales_offset, T, xrows, yrows,     \
		                     (blockIdx.x % G) * TC_BM, (blockIdx.x / G) * TC_BN);                                      \
	}

MATMUL_TC(matmul_tc_f16, false)
MATMUL_TC(matmul_tc_w4a16, true)

// tc_split_rows_body is the pre-split of nrows rows of x [nrows][cols],
// each 32-value chunk as the in-kernel staging splits it (tc_split8: the
// same bits). Four neighbouring threads a chunk, grid-stride in whole
// blocks. A16 false writes hi, lo [nrows][chunks * 32] halves (zero past
// cols) and inv [nrows][chunks] (2^-s); A16 true writes what of hi, inv,
// lo as zeros and xr [nrows][cols] (the rounded values hi·2^-s as FP32)
// is not null.
template <bool A16>
__device__ __forceinline__ void tc_split_rows_body(const float* x, int nrows, int cols, __half* hi, __half* lo, float* inv,
                                                   float* xr) {
	const int nck = (cols + TC_BK - 1) / TC_BK;
	const long long total = 4LL * nrows * nck, stride = (long long)gridDim.x * blockDim.x;
	for (long long base = (long long)blockIdx.x * blockDim.x; base < total; base += stride) {
		const long long gid = base + threadIdx.x, quad = gid >> 2;
		const bool ok = gid < total;
		const int hh = (int)(gid & 3), row = ok ? (int)(quad / nck) : 0, c = ok ? (int)(quad % nck) : 0;
		const int k0 = c * TC_BK + hh * 8;
		float v[8];
#pragma unroll
		for (int j = 0; j < 8; j++) v[j] = ok && k0 + j < cols ? x[(size_t)row * cols + k0 + j] : 0.0f;
		unsigned h[4], l[4];
		const int s = tc_split8(v, h, l);  // every lane of the warp takes part
		if (!ok) continue;
		const size_t at = (size_t)row * nck * TC_BK + k0;
		if (!A16) {
			*reinterpret_cast<uint4*>(hi + at) = make_uint4(h[0], h[1], h[2], h[3]);
			*reinterpret_cast<uint4*>(lo + at) = make_uint4(l[0], l[1], l[2], l[3]);
			if (hh == 0) inv[(size_t)row * nck + c] = tc_pow2(-s);
			continue;
		}
		if (hi != nullptr) *reinterpret_cast<uint4*>(hi + at) = make_uint4(h[0], h[1], h[2], h[3]);
		if (lo != nullptr) *reinterpret_cast<uint4*>(lo + at) = make_uint4(0u, 0u, 0u, 0u);
		if (inv != nullptr && hh == 0) inv[(size_t)row * nck + c] = tc_pow2(-s);
		if (xr != nullptr) {
			const float up = tc_pow2(s), down = tc_pow2(-s);
#pragma unroll
			for (int j = 0; j < 8; j++)  // hi's value again, times 2^-s
				if (k0 + j < cols) xr[(size_t)row * cols + k0 + j] = __fmul_rn(__half2float(__float2half_rn(__fmul_rn(v[j], up))), down);
		}
	}
}

// tc_split_rows splits nrows rows of x once for the matmuls that read them
// (tuning.tcPreSplit): tc_split_rows_body's hi, lo and inv.
extern "C" __global__ void tc_split_rows(const float* x, int nrows, int cols, __half* hi, __half* lo, float* inv) {
	grid_dep_enter();
	tc_split_rows_body<false>(x, nrows, cols, hi, lo, inv, nullptr);
}

// tc_split_rows_a16c is tc_split_rows for FP16 activations (the declared
// dense activations, engine.LoadOptions.DenseActivations): each 32-value
// chunk rounded at its own shift (tc_split8's hi, half.ChunkShiftF16's
// values). Each output is written only when its pointer is not null: hi
// and inv as tc_split_rows writes them; lo as zeros (so that a kernel
// adding the low halves' sums adds zeros); xr [nrows][cols] the rounded
// values as FP32 rows, for the kernels that split in-kernel or read FP32
// rows.
extern "C" __global__ void tc_split_rows_a16c(const float* x, int nrows, int cols, __half* hi, __half* lo, float* inv, float* xr) {
	grid_dep_enter();
	tc_split_rows_body<true>(x, nrows, cols, hi, lo, inv, xr);
}

// tc_split_rows_a16r is the row-shift FP16 pre-split (tuning.tcA16Row):
// for each of nrows rows of x [nrows][cols], s from the row's largest
// magnitude (tc_shift), hi [nrows][chunks * 32] = fp16(x 2^s) (zero past
// cols) and inv [nrows] = 2^-s. A block a row (grid-stride over rows),
// 128 bytes of dynamic shared memory (the warps' maxima).
extern "C" __global__ void tc_split_rows_a16r(const float* x, int nrows, int cols, __half* hi, float* inv) {
	float* red = xs_smem;
	grid_dep_enter();
	const int nck = (cols + TC_BK - 1) / TC_BK, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int row = blockIdx.x; row < nrows; row += gridDim.x) {
		const float* xr = x + (size_t)row * cols;
		float mx = 0.0f;
		for (int k = threadIdx.x; k < cols; k += blockDim.x) mx = fmaxf(mx, fabsf(xr[k]));
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		if (lane == 0) red[warp] = mx;
		__syncthreads();
		if (warp == 0) {
			mx = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0f;
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
			if (lane == 0) red[0] = mx;
		}
		__syncthreads();
		const int sh = tc_shift(red[0]);
		const float p = tc_pow2(sh);
		__half* hr = hi + (size_t)row * nck * TC_BK;
		for (int k = threadIdx.x; k < nck * TC_BK; k += blockDim.x)
			hr[k] = __float2half_rn(k < cols ? __fmul_rn(xr[k], p) : 0.0f);
		if (threadIdx.x == 0) inv[row] = tc_pow2(-sh);
		__syncthreads();  // red is rewritten by the next row
	}
}

// The pre-split twins of the kernels above: the activations come from
// tc_split_rows's arrays (row xrow(t) of them) instead of x, so each block
// copies its tokens' halves instead of splitting them again for every row
// tile. The same products, the same bits.
#define MATMUL_TC_PRE(NAME, INT4)                                                                                       \
	extern "C" __global__ void __launch_bounds__(TC_THREADS)                                                            \
	    NAME(float* y, const uint8_t* mat, const __half* hi, const __half* lo, const float* inv, const void* bias,      \
	         int bias_kind, int rows, int cols, int cols_padded, int scales_offset, int T, const int* xrows,             \
	         const int* yrows) {                                                                                        \
		grid_dep_enter();                                                                                             \
		const int G = (T + TC_BM - 1) / TC_BM;                                                                        \
		matmul_tc_body<INT4, true>(y, mat, nullptr, bias, bias_kind, rows, cols, cols_padded, scales_offset, T, xrows,   \
		                           yrows, (blockIdx.x % G) * TC_BM, (blockIdx.x / G) * TC_BN, 0, 1 << 30,                \
		                           TcSplitX{hi, lo, inv});                                                            \
	}

MATMUL_TC_PRE(matmul_tc_pre_f16, false)
MATMUL_TC_PRE(matmul_tc_pre_w4a16, true)

// matmul_tc_f16_splitk: an FP16 matmul of few tokens cut along the columns
// (tuning.tcSplitK; runtime/cuda batched.go tcSplit chooses ks from T,
// rows and cols alone). Block b is split s = b % ks of token group
// (b / ks) % G of row tile b / (ks * G): chunks [s * per, (s + 1) * per) of
// every row, per = ceil(chunks / ks), into part[s][t][r] (no bias). Then
// matmul_splitk_reduce adds the ks partials of each output in split order
// and the bias. A token's results depend on its activations, the matrix and
// ks; at 64 tokens a 2048 x 2048 projection is 16 blocks unsplit, on a GPU
// of 132 SMs.
extern "C" __global__ void __launch_bounds__(TC_THREADS)
    matmul_tc_f16_splitk(float* part, const uint8_t* mat, const float* x, int rows, int cols, int T, int ks) {
	grid_dep_enter();
	const int G = (T + TC_BM - 1) / TC_BM, s = blockIdx.x % ks, g = (blockIdx.x / ks) % G, tile = blockIdx.x / (ks * G);
	const int per = ((cols + TC_BK - 1) / TC_BK + ks - 1) / ks;
	matmul_tc_body<false>(part + (size_t)s * T * rows, mat, x, nullptr, 0, rows, cols, 0, 0, T, nullptr, nullptr, g * TC_BM,
	                      tile * TC_BN, s * per, (s + 1) * per);
}

// matmul_tc_f16_splitk_a16: matmul_tc_f16_splitk on FP16 activations (the
// declared dense activations where a block's share is under the burst
// twin's bound): each chunk's sums from the hi halves of the in-kernel
// split alone, so the partials of matmul_tc_f16_pre_splitk_burst_a16 on
// tc_split_rows_a16c's pre-split (mmtc), without the pre-split's launch.
extern "C" __global__ void __launch_bounds__(TC_THREADS)
    matmul_tc_f16_splitk_a16(float* part, const uint8_t* mat, const float* x, int rows, int cols, int T, int ks) {
	grid_dep_enter();
	const int G = (T + TC_BM - 1) / TC_BM, s = blockIdx.x % ks, g = (blockIdx.x / ks) % G, tile = blockIdx.x / (ks * G);
	const int per = ((cols + TC_BK - 1) / TC_BK + ks - 1) / ks;
	matmul_tc_body<false, false, 0, 1, false, false>(part + (size_t)s * T * rows, mat, x, nullptr, 0, rows, cols, 0, 0, T,
	                                                 nullptr, nullptr, g * TC_BM, tile * TC_BN, s * per, (s + 1) * per);
}

// matmul_tc_f16_pre_splitk_burst: matmul_tc_f16_splitk's blocks, partials
// and bits (block b: split b % ks of token group (b / ks) % G of row tile
// b / (ks G), chunks [s per, (s + 1) per) into part[s][t][r]) on the
// pre-split activations, with a block's chunks in flight together (the
// default: runtime/cuda tcDenseBurst; tuning.tcNoBurst turns it off). The
// two-stage kernel keeps one chunk's loads in flight while it computes the
// one before, so a block of split-K's usual 4 chunks pays ~5 global round
// trips one after another (Nsight Compute, results/depth-v1-s30: 17 µs a
// 2048 x 2048 projection at 64 tokens on an H100, ~0.5 TB/s, timed alone).
// Here a block copies chunks c .. c + TC_BURST - 2 into TC_BURST stages
// with cp.async (the matrix's FP16 rows and the tokens' hi, lo and 2^-s,
// no registers between), so a 4-chunk share is one round trip; the
// matrix's copies go out before grid_dep_enter (weights are never written,
// so they need not wait for the kernel ahead). Each stage holds tc_store's
// layout with the same values (the pre-split is the in-kernel split's bits,
// and a padding token's halves are zero), tc_chunk computes it in chunk
// order, and a warp's m16 tiles of padding tokens alone are skipped (their
// rows never reach part): the same partials, bit for bit. The columns are
// a multiple of 8 and mat 16-byte aligned (one 16-byte copy a row
// segment). Dynamic shared memory: TC_SMEM_BURST.
#define TC_BURST 5
#define TC_SMEM_BURST (TC_BURST * TC_STAGE)

// tc_burst_put copies chunk c of the block's matrix rows (W) or of its
// tokens' pre-split halves and 2^-s (X) into stage st: the matrix row
// segments tc_store's FP16 path would store (zero past rows and cols), the
// token's quarter hh of its hi and lo and, at hh 0, its 2^-s; a padding
// token (xi < 0) stages zeros and 2^-126, as tc_load's PRE path.
template <bool X, bool LO = true>
__device__ __forceinline__ void tc_burst_put(uint8_t* st, const uint8_t* __restrict__ mat, int rows, int cols, int n0,
                                             const TcSplitX& sx, int xi, int nck, int c, int tid, int sm, int hh) {
	__half* ah = reinterpret_cast<__half*>(st);
	__half* al = ah + TC_BM * TC_LD;
	__half* bs = al + TC_BM * TC_LD;
	float* inv = reinterpret_cast<float*>(bs + TC_BN * TC_LD);
	if (X) {
		__half* hd = ah + sm * TC_LD + hh * 8;
		__half* ld = al + sm * TC_LD + hh * 8;
		if (xi >= 0) {
			const size_t at = (size_t)xi * nck * TC_BK + c * TC_BK + hh * 8;
			cp_async16(hd, sx.hi + at);
			if (LO) cp_async16(ld, sx.lo + at);
			if (hh == 0) cp_async4(inv + sm, sx.inv + (size_t)xi * nck + c);
		} else {
			*reinterpret_cast<uint4*>(hd) = *reinterpret_cast<uint4*>(ld) = make_uint4(0u, 0u, 0u, 0u);
			if (hh == 0) inv[sm] = tc_pow2(-126);
		}
		return;
	}
	const __half* W = reinterpret_cast<const __half*>(mat);
#pragma unroll
	for (int u = 0; u < 2; u++) {
		const int idx = tid + TC_THREADS * u, rr = tc_quad_row(idx >> 2), seg = idx & 3;
		const int row = n0 + rr, kk = c * TC_BK + seg * 8;
		__half* dst = bs + rr * TC_LD + seg * 8;
		if (row < rows && kk < cols)
			cp_async16(dst, W + (size_t)row * cols + kk);
		else
			*reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
	}
}

template <bool LO>
__device__ __forceinline__ void tc_burst_body(float* part, const uint8_t* mat, const __half* hi, const __half* lo,
                                              const float* inv, int rows, int cols, int T, int ks) {
	const int G = (T + TC_BM - 1) / TC_BM, s = blockIdx.x % ks, g = (blockIdx.x / ks) % G, tile = blockIdx.x / (ks * G);
	const int nck = (cols + TC_BK - 1) / TC_BK, per = (nck + ks - 1) / ks;
	const int t0 = g * TC_BM, n0 = tile * TC_BN, c0 = s * per, c1 = min(nck, c0 + per);
	const TcSplitX sx{hi, lo, inv};
	uint8_t* smem = reinterpret_cast<uint8_t*>(xs_smem);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, q = lane & 3;
	const int wm = (warp & 1) * 32, wn = (warp >> 1) * 32;
	const int sm = tc_quad_row(tid >> 2), hh = tid & 3;  // the token this thread stages, and its quarter
	const int xi = t0 + sm < T ? t0 + sm : -1;
	float acc[2][4][4];
#pragma unroll
	for (int mi = 0; mi < 2; mi++)
#pragma unroll
		for (int ni = 0; ni < 4; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;
	// The matrix's first chunks, then (after the kernel ahead) the tokens':
	// group i holds chunk c0 + i's tokens (group 0 also every matrix copy
	// made here).
	for (int i = 0; i < TC_BURST - 1; i++)
		if (c0 + i < c1) tc_burst_put<false, LO>(smem + i * TC_STAGE, mat, rows, cols, n0, sx, xi, nck, c0 + i, tid, sm, hh);
	grid_dep_enter();
	for (int i = 0; i < TC_BURST - 1; i++) {
		if (c0 + i < c1) tc_burst_put<true, LO>(smem + i * TC_STAGE, mat, rows, cols, n0, sx, xi, nck, c0 + i, tid, sm, hh);
		cp_async_commit();
	}
	for (int c = c0, it = 0; c < c1; c++, it++) {
		// This thread's copies of chunk c are done; after the barrier every
		// thread's are, and every warp has computed chunk c - 1, whose
		// stage then takes chunk c + TC_BURST - 1.
		cp_async_wait<TC_BURST - 2>();
		__syncthreads();
		const int cn = c + TC_BURST - 1;
		if (cn < c1) {
			uint8_t* sn = smem + ((it + TC_BURST - 1) % TC_BURST) * TC_STAGE;
			tc_burst_put<false, LO>(sn, mat, rows, cols, n0, sx, xi, nck, cn, tid, sm, hh);
			tc_burst_put<true, LO>(sn, mat, rows, cols, n0, sx, xi, nck, cn, tid, sm, hh);
		}
		cp_async_commit();
		tc_chunk<false, true, 4, LO>(acc, smem + (it % TC_BURST) * TC_STAGE, wm, wn, gq, q, t0, T);
	}
	tc_write<4>(part + (size_t)s * T * rows, acc, nullptr, 0, rows, T, nullptr, t0, n0, wm, wn, gq, q);
}

extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_f16_pre_splitk_burst(float* part, const uint8_t* mat, const __half* hi, const __half* lo, const float* inv,
                                   int rows, int cols, int T, int ks) {
	tc_burst_body<true>(part, mat, hi, lo, inv, rows, cols, T, ks);
}

// matmul_tc_f16_pre_splitk_burst_a16 (tuning.tcA16Dense): the burst twin
// on FP16 activations, each chunk's sums from the hi halves alone (lo is
// neither copied nor read): other bits.
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_f16_pre_splitk_burst_a16(float* part, const uint8_t* mat, const __half* hi, const __half* lo, const float* inv,
                                       int rows, int cols, int T, int ks) {
	tc_burst_body<false>(part, mat, hi, lo, inv, rows, cols, T, ks);
}

// matmul_tc_f16_splitk_ring: matmul_tc_f16_splitk with the matrix's chunks
// streamed through the FP16 cp.async ring (tuning.tcRingF16; dynamic shared
// memory TC_SMEM_RING_F16): the same partials, bit for bit.
extern "C" __global__ void __launch_bounds__(TC_THREADS)
    matmul_tc_f16_splitk_ring(float* part, const uint8_t* mat, const float* x, int rows, int cols, int T, int ks) {
	grid_dep_enter();
	const int G = (T + TC_BM - 1) / TC_BM, s = blockIdx.x % ks, g = (blockIdx.x / ks) % G, tile = blockIdx.x / (ks * G);
	const int per = ((cols + TC_BK - 1) / TC_BK + ks - 1) / ks;
	matmul_tc_body<false, false, TC_RING_F16>(part + (size_t)s * T * rows, mat, x, nullptr, 0, rows, cols, 0, 0, T, nullptr,
	                                          nullptr, g * TC_BM, tile * TC_BN, s * per, (s + 1) * per);
}

// matmul_tc_pre_ring_f16: matmul_tc_pre_f16 (the dense projections of a
// longer prompt) with the FP16 ring; the same bits.
extern "C" __global__ void __launch_bounds__(TC_THREADS)
    matmul_tc_pre_ring_f16(float* y, const uint8_t* mat, const __half* hi, const __half* lo, const float* inv,
                           const void* bias, int bias_kind, int rows, int cols, int cols_padded, int scales_offset, int T,
                           const int* xrows, const int* yrows) {
	grid_dep_enter();
	const int G = (T + TC_BM - 1) / TC_BM;
	matmul_tc_body<false, true, TC_RING_F16>(y, mat, nullptr, bias, bias_kind, rows, cols, cols_padded, scales_offset, T,
	                                         xrows, yrows, (blockIdx.x % G) * TC_BM, (blockIdx.x / G) * TC_BN, 0, 1 << 30,
	                                         TcSplitX{hi, lo, inv});
}

// splitk_sum is output i's ks partials added in split order,
// ((part[0][i] + part[1][i]) + part[2][i]) + ...: eight partials are
// loaded before their adds, so a thread has eight loads in flight, not
// one a dependent add (the adds and their order are the one-at-a-time
// loop's: the same bits).
__device__ __forceinline__ float splitk_sum(const float* __restrict__ part, int ks, long long n, long long i) {
	float v = part[i];
	for (int s = 1; s < ks; s += 8) {
		float p[8];
#pragma unroll
		for (int j = 0; j < 8; j++) p[j] = s + j < ks ? part[(size_t)(s + j) * n + i] : 0.0f;
#pragma unroll
		for (int j = 0; j < 8; j++)
			if (s + j < ks) v = __fadd_rn(v, p[j]);
	}
	return v;
}

// matmul_splitk_reduce: y[t][r] = ((part[0][t][r] + part[1][t][r]) + ...)
// + bias[r] (when bias_kind != 0), the ks partials in split order. One
// thread an output, grid-stride.
extern "C" __global__ void matmul_splitk_reduce(float* y, const float* part, int ks, int T, int rows, const void* bias,
                                                int bias_kind) {
	grid_dep_enter();
	const long long n = (long long)T * rows;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float v = splitk_sum(part, ks, n, i);
		if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, (int)(i % rows)));
		y[i] = v;
	}
}

// matmul_splitk_reduce_parts: matmul_splitk_reduce over a matrix stored as
// row blocks (the fused q|k|v projection, runtime/cuda MatMulParts), each
// block's outputs written to its own [T][n_j] array: row r < n0 to
// y0[t][r], r < n0 + n1 to y1[t][r - n0], the rest to y2[t][r - n0 - n1];
// the same adds in the same order as matmul_splitk_reduce, so each block's
// outputs are its own MatMul's bits.
extern "C" __global__ void matmul_splitk_reduce_parts(float* y0, float* y1, float* y2, const float* part, int ks, int T, int rows,
                                                      int n0, int n1, const void* bias, int bias_kind) {
	grid_dep_enter();
	const long long n = (long long)T * rows;
	const int n2 = rows - n0 - n1;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		float v = splitk_sum(part, ks, n, i);
		const int r = (int)(i % rows);
		const long long t = i / rows;
		if (bias_kind != 0) v = __fadd_rn(v, bias_at(bias, bias_kind, r));
		if (r < n0) y0[t * n0 + r] = v;
		else if (r < n0 + n1) y1[t * n1 + (r - n0)] = v;
		else y2[t * n2 + (r - n0 - n1)] = v;
	}
}

// tc_group (common.cuh) is one entry of a grouped launch's table. A block
// of an entry of count 0 returns at once.

// matmul_tc_grouped_{f16,w4a16}: one launch for several experts' matrices
// of one layout (an expert wave's gate, up or down): block b is row tile
// b % tiles of entry b / tiles of the table. Each block runs the body of
// the single-matrix kernel on its entry's pairs, so a pair's outputs are
// the bits that kernel gives it (a token's results still depend only on
// its activations and its expert's matrix). No bias: expert matrices have
// none. RING, SUB and NARROW are matmul_tc_body's (0, 1 and false: the
// two-stage kernel). Every grouped kernel is held to 128 registers, so 2
// blocks share an SM (TestKernelResources; without the bound ptxas gave the
// pre-split ring2 kernel 149).
#define MATMUL_TC_GROUPED(NAME, INT4, RING, SUB, NARROW)                                                                       \
	extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)                                                         \
	    NAME(float* y, const float* x, const tc_group* groups, int tiles, int rows, int cols, int cols_padded,           \
	         int scales_offset, const int* xrows, const int* yrows) {                                                   \
		grid_dep_enter(); /* the table may be the kernel before's output (tc_route_groups) */                       \
		const tc_group gr = groups[blockIdx.x / tiles];                                                               \
		if (gr.count <= 0) return; /* a device-routed table's unused entry (tc_route_groups) */                       \
		matmul_tc_body<INT4, false, RING, SUB, NARROW>(y, gr.mat, x, nullptr, 0, rows, cols, cols_padded, scales_offset, \
		                                       gr.count, xrows + gr.pair0, yrows + gr.pair0, 0, (blockIdx.x % tiles) * TC_BN); \
	}

#define MATMUL_TC_GROUPED_PRE(NAME, INT4, RING, SUB, NARROW)                                                                   \
	extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)                                                         \
	    NAME(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups, int tiles,         \
	         int rows, int cols, int cols_padded, int scales_offset, const int* xrows, const int* yrows) {              \
		grid_dep_enter(); /* the table may be the kernel before's output (tc_route_groups) */                       \
		const tc_group gr = groups[blockIdx.x / tiles];                                                               \
		if (gr.count <= 0) return; /* a device-routed table's unused entry (tc_route_groups) */                       \
		matmul_tc_body<INT4, true, RING, SUB, NARROW>(y, gr.mat, nullptr, nullptr, 0, rows, cols, cols_padded,          \
		                                              scales_offset,                                                   \
		                                      gr.count, xrows + gr.pair0, yrows + gr.pair0, 0, (blockIdx.x % tiles) * TC_BN, \
		                                      0, 1 << 30, TcSplitX{hi, lo, inv});                                      \
	}

MATMUL_TC_GROUPED(matmul_tc_grouped_f16, false, 0, 1, false)
MATMUL_TC_GROUPED(matmul_tc_grouped_w4a16, true, 0, 1, false)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_f16, false, 0, 1, false)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_w4a16, true, 0, 1, false)

// The grouped int4 kernels with the matrix's chunks streamed through a
// TC_RING-slot cp.async ring (the default, runtime/cuda tcGroupedRing;
// dynamic shared memory TC_SMEM_RING): the same table, pairs and bits as
// matmul_tc_grouped_w4a16 and its pre-split twin, TC_RING - 1 chunks of
// codes in flight a thread.
MATMUL_TC_GROUPED(matmul_tc_grouped_ring_w4a16, true, TC_RING, 1, false)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_ring_w4a16, true, TC_RING, 1, false)

// The grouped int4 ring kernels with two chunks a stage (matmul_tc_body's
// SUB 2; tuning.tcRing2; dynamic shared memory TC_SMEM_RING2): one barrier,
// one ring wait and one activation round trip for every two chunks of
// codes; the same table, pairs and bits.
MATMUL_TC_GROUPED(matmul_tc_grouped_ring2_w4a16, true, TC_RING2, 2, false)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_ring2_w4a16, true, TC_RING2, 2, false)

// The narrow twins of the ring kernels (matmul_tc_body's NARROW;
// tuning.tcNarrow): all 8 warps on a block's first 32 tokens, for launches
// whose entries hold at most 32 pairs each (a short prompt's experts); the
// same table, pairs and bits.
MATMUL_TC_GROUPED(matmul_tc_grouped_ring_narrow_w4a16, true, TC_RING, 1, true)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_ring_narrow_w4a16, true, TC_RING, 1, true)
MATMUL_TC_GROUPED(matmul_tc_grouped_ring2_narrow_w4a16, true, TC_RING2, 2, true)
MATMUL_TC_GROUPED_PRE(matmul_tc_grouped_pre_ring2_narrow_w4a16, true, TC_RING2, 2, true)

// The fragment-direct kernels (runtime/cuda tcGroupedFD, tcGroupedKernel
// and tcDenseFD): the same products, order and bits as the grouped int4
// ring kernels and the FP16 split-K kernel, with another data path.
// Session 22's profile of the ring kernel (kernels/NOTES.md) found it
// latency-bound at 2 blocks of 8 warps an SM: every chunk stages the
// matrix in shared memory and passes a block barrier before any warp can
// issue its mma. Here:
//
//   - each warp owns 16 matrix rows (two n8 tiles) of the block's 128 and
//     every token of the block (up to four m16 tiles), so a B fragment is
//     loaded (and dequantised) once for all of them;
//   - the matrix never enters shared memory. Int4: lane (g, q) loads word q
//     of its n8 tile's row g chunk by chunk (4 bytes, a warp 8 rows x 16
//     bytes), and the row's four lanes transpose their words
//     (tc_fd_transpose: two shuffles, two byte permutes) so that each holds
//     byte q of every word, which is what its B fragments take (tc_codes).
//     FP16: lane (g, q) loads its fragments' four words of row g directly
//     (a warp 8 rows x 64 bytes a chunk). Either way PD chunks ahead, in
//     registers;
//   - the activations' hi and lo halves and 2^-s come from the pre-split
//     arrays in slices of TC_FD_SL chunks, staged with cp.async one slice
//     ahead: one barrier every TC_FD_SL chunks instead of one a chunk;
//   - an int4 row's block scale is loaded once a 256-value block, one
//     block ahead.
//
// Each output's products and their order are tc_chunk's: for each (m16,
// n8) tile the chunk's sum starts from zero with hi of values 0..15, then
// lo, then hi and lo of 16..31; it is scaled by 2^-s and accumulated (int4:
// with the block scale, an FMA; FP16: an add), chunk by chunk in order. The
// loops run m16 tile by m16 tile (so only one tile's chunk sums are live),
// which changes no accumulator's own sequence: the bits are the ring and
// split-K kernels'. A padding token's row (past T, inside the last m16
// tile) is zero and never written; m16 tiles of padding alone are skipped,
// as the ring kernels skip them.
#define TC_FD_SL 4                       // chunks a staged slice of activations
#define TC_FD_PD 8                       // chunks of int4 codes a warp has in flight
#define TC_FD_PD_RS 4                    // the same for the row-shift builds of four m16 tiles (their scale-block sums take the registers)
#define TC_FD_PD16 4                     // chunks of FP16 weights a warp has in flight (4 words a chunk and n8 tile)
#define TC_FD_LD (TC_FD_SL * TC_BK + 8)  // halves a staged token row: 68 words, rows 4 banks apart
#define TC_FD_STAGE_OF(BM) (2 * (BM) * TC_FD_LD * 2 + TC_FD_SL * (BM) * 4)
#define TC_FD_STAGE TC_FD_STAGE_OF(TC_BM)
#define TC_SMEM_FD (2 * TC_FD_STAGE)
// The small-entry build (matmul_tc_grouped_pre_fd16_w4a16): entries of at
// most TC_FD16_BM pairs (one m16 tile), so a stage holds 16 token rows and
// a lane 8 accumulators; three blocks an SM.
#define TC_FD16_BM 16
#define TC_SMEM_FD16 (2 * TC_FD_STAGE_OF(TC_FD16_BM))
// Its three-stage build (tuning.tcFD16S3): slices staged two ahead.
#define TC_SMEM_FD16_S3 (3 * TC_FD_STAGE_OF(TC_FD16_BM))
static_assert(TC_FD_PD % TC_FD_SL == 0 && TC_FD_PD16 % TC_FD_SL == 0 && TC_SCALE_CHUNKS % TC_FD_PD == 0,
              "slices tile the pipelines, the int4 pipeline tiles the scale blocks");
static_assert(TC_THREADS / 32 * 16 == TC_BN, "8 warps of 16 rows make a row tile");

// tc_fd_transpose: the four lanes q = 0..3 of a row hold words 0..3 of its
// chunk (w = word q); each gets byte q of every word (byte j of the result
// = byte q of word j): a 4 x 4 byte transpose over lanes xor 1, then xor 2.
// Every lane of the warp takes part. The byte selectors depend on q alone
// (tc_fd_sel1, tc_fd_sel2), so a lane computes them once and each step is
// one PRMT instead of two and a select.
__device__ __forceinline__ unsigned tc_fd_sel1(int q) { return (q & 1) ? 0x3715u : 0x6240u; }
__device__ __forceinline__ unsigned tc_fd_sel2(int q) { return (q & 2) ? 0x3276u : 0x5410u; }
__device__ __forceinline__ unsigned tc_fd_transpose(unsigned w, unsigned sel1, unsigned sel2) {
	const unsigned p1 = (unsigned)__shfl_xor_sync(0xffffffffu, (int)w, 1);
	const unsigned r1 = __byte_perm(w, p1, sel1);
	const unsigned p2 = (unsigned)__shfl_xor_sync(0xffffffffu, (int)r1, 2);
	return __byte_perm(r1, p2, sel2);
}

// tc_fd_xrow is the pre-split row of the block's token t: xrows[t], or
// t0 + t without a row index.
__device__ __forceinline__ int tc_fd_xrow(const int* __restrict__ xrows, int t0, int t) {
	return xrows != nullptr ? xrows[t] : t0 + t;
}

// tc_fd_stage copies slice s (chunks c0 + s * TC_FD_SL .., before c1) of
// the block's T tokens' pre-split halves and 2^-s into stage st: hi, lo
// [BM][TC_FD_LD] halves, then inv [TC_FD_SL][BM] floats; cp.async,
// the caller commits. nck is the pre-split rows' chunk count. Without LO
// (the FP16-activation builds) the lo rows are not copied.
template <int BM = TC_BM, bool LO = true, bool RS = false>
__device__ __forceinline__ void tc_fd_stage(uint8_t* st, const TcSplitX& sx, const int* __restrict__ xrows, int t0, int T,
                                            int nck, int c0, int c1, int s, int tid) {
	__half* hs = reinterpret_cast<__half*>(st);
	__half* ls = hs + BM * TC_FD_LD;
	float* is = reinterpret_cast<float*>(ls + BM * TC_FD_LD);
	const int cs = c0 + s * TC_FD_SL, nc = min(TC_FD_SL, c1 - cs);
	if (nc <= 0) return;
	const int pieces = nc * (TC_BK / 8);  // 16-byte pieces of a token's slice row
	for (int i = tid; i < (LO ? 2 : 1) * T * pieces; i += TC_THREADS) {
		const int lo = i >= T * pieces, r = lo ? i - T * pieces : i, t = r / pieces, p = r - t * pieces;
		const size_t at = (size_t)tc_fd_xrow(xrows, t0, t) * nck * TC_BK + (size_t)cs * TC_BK + p * 8;
		cp_async16((lo ? ls : hs) + t * TC_FD_LD + p * 8, (lo ? sx.lo : sx.hi) + at);
	}
	if (!RS) {  // RS: one 2^-s a token row (tc_split_rows_a16r), applied after the last chunk
		for (int i = tid; i < T * nc; i += TC_THREADS) {
			const int t = i / nc, cc = i - t * nc;
			cp_async4(is + cc * BM + t, sx.inv + (size_t)tc_fd_xrow(xrows, t0, t) * nck + cs + cc);
		}
	}
}

// tc_fd_scales loads the block scales (256-value block b) of the four
// output rows lane (g, q) accumulates: rows nrow0 + 8 ni + e (0 past the
// last row).
__device__ __forceinline__ void tc_fd_scales(float (&sc)[2][2], const uint8_t* __restrict__ mat, int rows, int cols_padded,
                                             int scales_offset, int nrow0, int b) {
	const __half* S = reinterpret_cast<const __half*>(mat + scales_offset);
#pragma unroll
	for (int ni = 0; ni < 2; ni++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int n = nrow0 + 8 * ni + e;
			sc[ni][e] = n < rows ? __half2float(__ldg(S + (size_t)n * (cols_padded >> 8) + b)) : 0.0f;
		}
}

// tc_fd_load loads chunk c of this lane's B words into w[ni][]: int4, word
// q of the chunk of row g of n8 tile ni, nothing past the last chunk (w
// keeps what it held: such a chunk is never used), and row 0's past the
// last row (rb points there: that column's outputs are never written, and
// an mma's output column depends on its own B column alone); FP16, the four
// words its fragments take at values 2q, 2q + 8, 2q + 16 and 2q + 24 of the
// chunk (zero past the last row or column: the columns are even).
template <bool INT4>
__device__ __forceinline__ void tc_fd_load(unsigned (&w)[2][INT4 ? 1 : 4], const unsigned* const (&rb)[2], const bool (&rok)[2],
                                           int c, int c1, int cols, int q) {
#pragma unroll
	for (int ni = 0; ni < 2; ni++) {
		if (INT4) {
			if (c < c1) w[ni][0] = __ldg(rb[ni] + 4 * c);
		} else {
#pragma unroll
			for (int u = 0; u < 4; u++) {
				const int k = c * TC_BK + 8 * u + 2 * q;
				w[ni][u] = rok[ni] && c < c1 && k < cols ? __ldg(rb[ni] + 16 * c + 4 * u) : 0u;
			}
		}
	}
}

// tc_fd_body computes a block's 128 rows from n0 for T <= BM tokens
// (pre-split row tc_fd_xrow(xrows, t0, t) of token t) over chunks [c0, c1)
// of the matrix, into y[yrows[t] or t0 + t][r]. INT4 needs c0 = 0 (its
// scale pipeline starts at block 0). The dynamic shared memory is
// TC_SMEM_FD (BM = TC_BM) or TC_SMEM_FD16 (BM = TC_FD16_BM: one m16 tile,
// the small-entry build). BM changes only how many m16 tiles a lane may
// hold and the staging's row count, not any output's products or order:
// the same bits.
//
// GU (the gate|up build, int4): the block computes 64 rows from n0 of two
// matrices of one shape, mat (the gate: warps 0-3) and mat2 (the up: warps
// 4-7), over the same staged activations, and writes y[..][r] =
// silu_mul(gate, up) (SiLUMul's expression) instead of either. A warp's
// loop is the other builds' with its matrix and 16 rows, so each gate and
// up value has their bits, and so has the product. The up warps hand their
// accumulators to the gate warps through the stages' shared memory (BM x 64
// floats) once every warp is done with them.
//
// NS is the activation stages: 2, or 3 (the three-stage build: a slice is
// staged two slices ahead, so the barrier at a slice's start waits for a
// copy issued two slices before, not one; the same values in the same
// order, so the same bits).
//
// LO false is the FP16-activation build (tuning.tcA16): each chunk's sum
// takes hi alone (x rounded to FP16 at its chunk's shift, W4A16 with FP32
// accumulation), half the mma and ldmatrix and half the staging; other
// bits than the LO build's, within FP16's rounding of each activation.
//
// RS (the row-shift FP16 build, tuning.tcA16Row; int4, without LO) reads
// a pre-split with one shift a token row (tc_split_rows_a16r: hi =
// fp16(x 2^s), s from the row's largest magnitude, inv[row] = 2^-s).
// All chunks of a 256-value scale block then share a token's shift, so
// the block's mma accumulate into one FP32 sum (blk) and the block scale
// is applied once a block instead of 2^-s and the scale once a chunk;
// 2^-s multiplies each output once, after the last chunk. Other bits again.
template <bool INT4, int PD, int BM = TC_BM, bool GU = false, int NS = 2, bool LO = true, bool RS = false>
__device__ __forceinline__ void tc_fd_body(float* __restrict__ y, const uint8_t* __restrict__ mat, int rows, int cols,
                                           int cols_padded, int scales_offset, int T, const int* __restrict__ xrows,
                                           const int* __restrict__ yrows, int t0, int n0, int c0, int c1, const TcSplitX& sx,
                                           const uint8_t* __restrict__ mat2 = nullptr) {
	static_assert(PD % TC_FD_SL == 0, "a slice starts at a pipeline step");
	static_assert(BM % 16 == 0 && BM <= TC_BM, "whole m16 tiles, at most four");
	constexpr int MTM = BM / 16;  // the m16 tiles a lane may hold
	constexpr int NW = INT4 ? 1 : 4;  // words a lane loads per chunk and n8 tile
	uint8_t* smem = reinterpret_cast<uint8_t*>(xs_smem);
	const int MT = (T + 15) / 16;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
	static_assert(!GU || (INT4 && TC_THREADS == 256), "the gate|up build: int4, warps 0-3 gate, 4-7 up");
	static_assert(!RS || (INT4 && !LO), "the row-shift build: int4, FP16 activations");
	const int wn = GU ? (warp & 3) * 16 : warp * 16;
	if (GU && warp >= 4) mat = mat2;  // warp-uniform
	const int nck = (cols + TC_BK - 1) / TC_BK;  // the pre-split rows' chunks
	c1 = min(c1, nck);

	static_assert(NS == 2 || NS == 3, "two or three activation stages");
	// The padding tokens' rows of the last m16 tile (every stage): zeros.
	const int pad = 16 * MT - T;
	for (int i = tid; i < NS * pad * TC_FD_LD; i += TC_THREADS) {
		const int st = i / (pad * TC_FD_LD), r = i - st * pad * TC_FD_LD;
		__half* hs = reinterpret_cast<__half*>(smem + st * TC_FD_STAGE_OF(BM));
		const int t = T + r / TC_FD_LD, k = r % TC_FD_LD;
		hs[t * TC_FD_LD + k] = __float2half_rn(0.0f);
		hs[BM * TC_FD_LD + t * TC_FD_LD + k] = __float2half_rn(0.0f);
	}
	tc_fd_stage<BM, LO, RS>(smem, sx, xrows, t0, T, nck, c0, c1, 0, tid);
	cp_async_commit();
	if (NS == 3) {
		tc_fd_stage<BM, LO, RS>(smem + TC_FD_STAGE_OF(BM), sx, xrows, t0, T, nck, c0, c1, 1, tid);
		cp_async_commit();
	}

	// Lane (g, q)'s rows: n8 tile ni's row g, from word q (int4) or word q
	// of the row (FP16: the chunk's words are 16 apart).
	const unsigned* rb[2];
	bool rok[2];
#pragma unroll
	for (int ni = 0; ni < 2; ni++) {
		const int r = n0 + wn + 8 * ni + g;
		rok[ni] = r < rows;
		const size_t rowBytes = INT4 ? (size_t)(cols_padded >> 1) : (size_t)cols * 2;
		rb[ni] = reinterpret_cast<const unsigned*>(mat + (size_t)(rok[ni] ? r : 0) * rowBytes) + q;
	}
	unsigned raw[PD][2][NW];
#pragma unroll
	for (int j = 0; j < PD; j++) tc_fd_load<INT4>(raw[j], rb, rok, c0 + j, c1, cols, q);
	const unsigned sel1 = tc_fd_sel1(q), sel2 = tc_fd_sel2(q);
	// ldmatrix_x4's address of this lane's A row in stage 0 (the chunk and
	// the stage add constants to it).
	const tc_saddr a_lane = tc_shared_addr(smem) + ((lane & 15) * TC_FD_LD + 8 * (lane >> 4)) * 2;
	// Int4: the rows' words at chunk cb (the pipeline's next loads are at
	// constant offsets from them; advanced PD chunks an iteration).
	const unsigned* rbc[2] = {rb[0] + 4 * c0, rb[1] + 4 * c0};
	const int nrow0 = n0 + wn + 2 * q;  // the first output row of this lane's accumulators
	float sc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}, scn[2][2];
	if (INT4) tc_fd_scales(scn, mat, rows, cols_padded, scales_offset, nrow0, c0 / TC_SCALE_CHUNKS);

	float acc[MTM][2][4];
	float blk[RS ? MTM : 1][2][4];  // RS: the scale block's sums so far
#pragma unroll
	for (int mi = 0; mi < MTM; mi++)
#pragma unroll
		for (int ni = 0; ni < 2; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

	for (int cb = c0; cb < c1; cb += PD) {
#pragma unroll
		for (int j = 0; j < PD; j++) {
			const int c = cb + j;
			if (c >= c1) break;  // uniform
			if (j % TC_FD_SL == 0) {
				// Slice (c - c0) / SL has arrived (this thread's copies;
				// with three stages the next slice's may still be in
				// flight), every thread's copies are visible after the
				// barrier, and every warp is done with the slice before
				// it, whose stage slice s + NS - 1 now fills.
				cp_async_wait<NS - 2>();
				__syncthreads();
				const int s = (c - c0) / TC_FD_SL;
				const int nst = NS == 2 ? (s + 1) & 1 : (s + NS - 1) % NS;  // the stage slice s + NS - 1 fills
				tc_fd_stage<BM, LO, RS>(smem + nst * TC_FD_STAGE_OF(BM), sx, xrows, t0, T, nck, c0, c1, s + NS - 1, tid);
				cp_async_commit();
			}
			if (INT4 && c % TC_SCALE_CHUNKS == 0) {
				const int b = c / TC_SCALE_CHUNKS;
#pragma unroll
				for (int ni = 0; ni < 2; ni++) sc[ni][0] = scn[ni][0], sc[ni][1] = scn[ni][1];
				if ((b + 1) * TC_SCALE_CHUNKS < c1) tc_fd_scales(scn, mat, rows, cols_padded, scales_offset, nrow0, b + 1);
			}
			// This chunk's B fragments (tc_chunk's bf at ks 0 and 16).
			unsigned bf[2][2][2];
#pragma unroll
			for (int ni = 0; ni < 2; ni++) {
				if (INT4) {
					const unsigned w = tc_fd_transpose(raw[j][ni][0], sel1, sel2);
					bf[0][ni][0] = tc_codes(w, 0), bf[0][ni][1] = tc_codes(w, 1);
					bf[1][ni][0] = tc_codes(w, 2), bf[1][ni][1] = tc_codes(w, 3);
				} else {
					bf[0][ni][0] = raw[j][ni][0], bf[0][ni][1] = raw[j][ni][NW > 1 ? 1 : 0];
					bf[1][ni][0] = raw[j][ni][NW > 2 ? 2 : 0], bf[1][ni][1] = raw[j][ni][NW > 3 ? 3 : 0];
				}
			}
			if (INT4) {
				if (c + PD < c1) {
#pragma unroll
					for (int ni = 0; ni < 2; ni++) raw[j][ni][0] = __ldg(rbc[ni] + 4 * (j + PD));
				}
			} else {
				tc_fd_load<INT4>(raw[j], rb, rok, c + PD, c1, cols, q);
			}
			const int stg = NS == 2 ? ((c - c0) / TC_FD_SL) & 1 : ((c - c0) / TC_FD_SL) % NS;  // this slice's stage
			const uint8_t* st = smem + stg * TC_FD_STAGE_OF(BM);
			const float* is = reinterpret_cast<const float*>(st + 2 * BM * TC_FD_LD * 2) + ((c - c0) % TC_FD_SL) * BM;
			// This chunk's columns of the stage's hi rows (a_lane: lane l's row
			// l % 16 and column 8 (l / 16)); lo is BM rows further.
			const tc_saddr a_chunk = a_lane + stg * TC_FD_STAGE_OF(BM) +
			                         ((c - c0) % TC_FD_SL) * TC_BK * 2;
			if (RS) {
				// The scale block's sums: from zero at its first chunk, the
				// block scale at its last (or the share's last) chunk.
				const bool first = c % TC_SCALE_CHUNKS == 0, last = c % TC_SCALE_CHUNKS == TC_SCALE_CHUNKS - 1 || c + 1 == c1;
#pragma unroll
				for (int mi = 0; mi < (RS ? MTM : 1); mi++) {
					if (mi >= MT) break;
#pragma unroll
					for (int ks = 0; ks < 2; ks++) {
						unsigned af[4];
						ldmatrix_x4(af, a_chunk + (16 * mi * TC_FD_LD + 16 * ks) * 2);
#pragma unroll
						for (int ni = 0; ni < 2; ni++) {
							if (first && ks == 0)
								mma_16816_z(blk[mi][ni], af, bf[ks][ni]);
							else
								mma_16816(blk[mi][ni], af, bf[ks][ni]);
						}
					}
					if (last) {
#pragma unroll
						for (int ni = 0; ni < 2; ni++)
#pragma unroll
							for (int e = 0; e < 4; e++) acc[mi][ni][e] = __fmaf_rn(blk[mi][ni][e], sc[ni][e & 1], acc[mi][ni][e]);
					}
				}
			} else {
#pragma unroll
				for (int mi = 0; mi < MTM; mi++) {
					if (mi >= MT) break;  // m16 tiles of padding tokens alone
					float part[2][4];
#pragma unroll
					for (int ks = 0; ks < 2; ks++)
#pragma unroll
						for (int pi = 0; pi < (LO ? 2 : 1); pi++) {
							unsigned af[4];
							ldmatrix_x4(af, a_chunk + ((pi * BM + 16 * mi) * TC_FD_LD + 16 * ks) * 2);
#pragma unroll
							for (int ni = 0; ni < 2; ni++) {
								if (ks == 0 && pi == 0)
									mma_16816_z(part[ni], af, bf[ks][ni]);
								else
									mma_16816(part[ni], af, bf[ks][ni]);
							}
						}
#pragma unroll
					for (int ni = 0; ni < 2; ni++)
#pragma unroll
						for (int e = 0; e < 4; e++) {
							const float f = __fmul_rn(part[ni][e], is[16 * mi + g + (e >> 1) * 8]);
							acc[mi][ni][e] = INT4 ? __fmaf_rn(f, sc[ni][e & 1], acc[mi][ni][e]) : __fadd_rn(acc[mi][ni][e], f);
						}
				}
			}
		}
#pragma unroll
		for (int ni = 0; ni < 2; ni++) rbc[ni] += 4 * PD;
	}
	cp_async_wait<0>();  // an empty last slice's group
	if (RS) {
		// Each output back to its token's scale: times 2^-s of its row.
#pragma unroll
		for (int mi = 0; mi < MTM; mi++) {
			if (mi >= MT) break;
#pragma unroll
			for (int e2 = 0; e2 < 2; e2++) {
				const int t = 16 * mi + g + 8 * e2;
				const float iv = t < T ? __ldg(sx.inv + tc_fd_xrow(xrows, t0, t)) : 0.0f;
#pragma unroll
				for (int ni = 0; ni < 2; ni++)
#pragma unroll
					for (int e1 = 0; e1 < 2; e1++) acc[mi][ni][2 * e2 + e1] = __fmul_rn(acc[mi][ni][2 * e2 + e1], iv);
			}
		}
	}

	if (GU) {
		// The up warps' values into shared memory ([t][64 rows], over the
		// stages every warp is done with), then the gate warps' products.
		float* ups = reinterpret_cast<float*>(smem);
		__syncthreads();
		if (warp >= 4) {
#pragma unroll
			for (int mi = 0; mi < MTM; mi++) {
				if (mi >= MT) break;
#pragma unroll
				for (int e2 = 0; e2 < 2; e2++)
#pragma unroll
					for (int ni = 0; ni < 2; ni++)
#pragma unroll
						for (int e1 = 0; e1 < 2; e1++)
							ups[(16 * mi + g + 8 * e2) * 64 + wn + 2 * q + 8 * ni + e1] = acc[mi][ni][2 * e2 + e1];
			}
		}
		__syncthreads();
		if (warp >= 4) return;
	}
#pragma unroll
	for (int mi = 0; mi < MTM; mi++) {
		if (mi >= MT) break;
#pragma unroll
		for (int e2 = 0; e2 < 2; e2++) {
			const int t = 16 * mi + g + 8 * e2;
			if (t >= T) continue;
			float* yr = y + (size_t)(yrows != nullptr ? yrows[t] : t0 + t) * rows;
			if (GU) {
				const float* ur = reinterpret_cast<const float*>(smem) + t * 64 + wn + 2 * q;
#pragma unroll
				for (int ni = 0; ni < 2; ni++)
#pragma unroll
					for (int e1 = 0; e1 < 2; e1++) {
						const int r = nrow0 + 8 * ni + e1;
						if (r < rows) yr[r] = silu_mul(acc[mi][ni][2 * e2 + e1], ur[8 * ni + e1]);
					}
			} else {
#pragma unroll
				for (int ni = 0; ni < 2; ni++)
#pragma unroll
					for (int e1 = 0; e1 < 2; e1++) {
						const int r = nrow0 + 8 * ni + e1;
						if (r < rows) yr[r] = acc[mi][ni][2 * e2 + e1];
					}
			}
		}
	}
}

// tc_grouped_pre_fd is a grouped fragment-direct launch's block b: row
// tile b % tiles of table entry b / tiles, for entries of at most BM pairs.
template <int BM, int NS = 2, bool LO = true, bool RS = false>
__device__ __forceinline__ void tc_grouped_pre_fd(float* y, const __half* hi, const __half* lo, const float* inv,
                                                  const tc_group* groups, int tiles, int rows, int cols, int cols_padded,
                                                  int scales_offset, const int* xrows, const int* yrows) {
	grid_dep_enter();  // the table may be the kernel before's output (tc_route_groups)
	const tc_group gr = groups[blockIdx.x / tiles];
	if (gr.count <= 0) return;  // a device-routed table's unused entry (tc_route_groups)
	tc_fd_body<true, RS && BM == TC_BM ? TC_FD_PD_RS : TC_FD_PD, BM, false, NS, LO, RS>(y, gr.mat, rows, cols, cols_padded, scales_offset, BM == TC_BM ? gr.count : min(gr.count, BM),
	                               xrows + gr.pair0, yrows + gr.pair0, 0, (blockIdx.x % tiles) * TC_BN, 0, 1 << 30,
	                               TcSplitX{hi, lo, inv});
}

// matmul_tc_grouped_pre_fd_w4a16: the grouped int4 ring kernels' table,
// pairs and bits (block b: row tile b % tiles of entry b / tiles).
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                   int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                   const int* yrows) {
	tc_grouped_pre_fd<TC_BM>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}

// matmul_tc_grouped_pre_fd16_w4a16 (tuning.tcFD16): the same kernel for a
// table whose entries hold at most TC_FD16_BM pairs (an expert's pairs cut
// in sixteens: runtime/cuda tcGroupedFD16), built for one m16 tile: a
// quarter of the staging (TC_SMEM_FD16) and a quarter of the accumulators,
// so three blocks an SM instead of two (Nsight Compute, results/depth-v1-s30:
// the 64-token launches ran at 2 blocks of 8 warps an SM, one warp in four
// eligible to issue). Every pair's products and order are the other
// fragment-direct kernel's: the same bits.
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                     int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                     const int* yrows) {
	tc_grouped_pre_fd<TC_FD16_BM>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}

// tc_grouped_pre_fd_gu is a grouped gate|up launch's block b: rows
// [64 (b % tiles), +64) of table entry b / tiles of both the gate table and
// the up table (tc_route_groups' tables 0 and 1: the same pairs, each
// expert's own matrices), act = silu_mul(gate, up) (tc_fd_body's GU).
template <int BM, int NS = 2, bool LO = true, bool RS = false>
__device__ __forceinline__ void tc_grouped_pre_fd_gu(float* act, const __half* hi, const __half* lo, const float* inv,
                                                     const tc_group* gate, const tc_group* up, int tiles, int rows, int cols,
                                                     int cols_padded, int scales_offset, const int* xrows, const int* yrows) {
	grid_dep_enter();  // the tables may be the kernel before's output (tc_route_groups)
	const int n = blockIdx.x / tiles;
	const tc_group gr = gate[n];
	if (gr.count <= 0) return;  // an unused entry
	tc_fd_body<true, RS && BM == TC_BM ? TC_FD_PD_RS : TC_FD_PD, BM, true, NS, LO, RS>(act, gr.mat, rows, cols, cols_padded, scales_offset,
	                                     BM == TC_BM ? gr.count : min(gr.count, BM), xrows + gr.pair0, yrows + gr.pair0, 0,
	                                     (blockIdx.x % tiles) * (TC_BN / 2), 0, 1 << 30, TcSplitX{hi, lo, inv}, up[n].mat);
}

// matmul_tc_grouped_pre_fd_gu_w4a16 (runtime/cuda RoutedGateUp): the
// fragment-direct kernel's gate and up launches and SiLUMul in one launch,
// with the bits of the three (tiles: 64-row tiles of the matrices).
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_gu_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                      const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                      const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_BM>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}

// matmul_tc_grouped_pre_fd16_gu_w4a16: the same for a table of entries of
// at most TC_FD16_BM pairs (the small-entry build's), three blocks an SM.
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_gu_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                        const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                        const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_FD16_BM>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}

// matmul_tc_grouped_pre_fd16_s3_w4a16 and matmul_tc_grouped_pre_fd16_gu_s3_w4a16
// (tuning.tcFD16S3): the small-entry builds with three activation stages
// (TC_SMEM_FD16_S3); the same bits.
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_s3_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                        int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                        const int* yrows) {
	tc_grouped_pre_fd<TC_FD16_BM, 3>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_gu_s3_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                           const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                           const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_FD16_BM, 3>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}

// The FP16-activation builds (tuning.tcA16; tc_fd_body without LO): the
// fragment-direct grouped kernels and their gate|up builds, each chunk's
// sums from the activations' hi halves alone. lo is not read. Other bits
// than the FP32-activation builds'.
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_a16_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                       int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                       const int* yrows) {
	tc_grouped_pre_fd<TC_BM, 2, false>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_a16_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                         int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                         const int* yrows) {
	tc_grouped_pre_fd<TC_FD16_BM, 2, false>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_gu_a16_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                          const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                          const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_BM, 2, false>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_gu_a16_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                            const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                            const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_FD16_BM, 2, false>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows,
	                                           yrows);
}

// The row-shift FP16 builds (tuning.tcA16Row; tc_fd_body's RS): the same
// four kernels on tc_split_rows_a16r's pre-split (inv: one 2^-s a row).
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_a16r_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                        int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                        const int* yrows) {
	tc_grouped_pre_fd<TC_BM, 2, false, true>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows, yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_a16r_w4a16(float* y, const __half* hi, const __half* lo, const float* inv, const tc_group* groups,
                                          int tiles, int rows, int cols, int cols_padded, int scales_offset, const int* xrows,
                                          const int* yrows) {
	tc_grouped_pre_fd<TC_FD16_BM, 2, false, true>(y, hi, lo, inv, groups, tiles, rows, cols, cols_padded, scales_offset, xrows,
	                                              yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_grouped_pre_fd_gu_a16r_w4a16(float* act, const __half* hi, const __half* lo, const float* inv, const tc_group* gate,
                                           const tc_group* up, int tiles, int rows, int cols, int cols_padded, int scales_offset,
                                           const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_BM, 2, false, true>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset, xrows,
	                                            yrows);
}
extern "C" __global__ void __launch_bounds__(TC_THREADS, 3)
    matmul_tc_grouped_pre_fd16_gu_a16r_w4a16(float* act, const __half* hi, const __half* lo, const float* inv,
                                             const tc_group* gate, const tc_group* up, int tiles, int rows, int cols,
                                             int cols_padded, int scales_offset, const int* xrows, const int* yrows) {
	tc_grouped_pre_fd_gu<TC_FD16_BM, 2, false, true>(act, hi, lo, inv, gate, up, tiles, rows, cols, cols_padded, scales_offset,
	                                                 xrows, yrows);
}

// matmul_tc_f16_pre_splitk_fd: matmul_tc_f16_splitk's blocks, partials and
// bits (block b: split b % ks of token group (b / ks) % G of row tile
// b / (ks G), chunks [s per, (s + 1) per) into part[s][t][r]) on the
// pre-split activations of x's T rows, fragment-direct. The columns are
// even (4-byte weight words; runtime/cuda tcDenseFD).
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2)
    matmul_tc_f16_pre_splitk_fd(float* part, const uint8_t* mat, const __half* hi, const __half* lo, const float* inv,
                                int rows, int cols, int T, int ks) {
	grid_dep_enter();
	const int G = (T + TC_BM - 1) / TC_BM, s = blockIdx.x % ks, g = (blockIdx.x / ks) % G, tile = blockIdx.x / (ks * G);
	const int per = ((cols + TC_BK - 1) / TC_BK + ks - 1) / ks;
	const int t0 = g * TC_BM;
	tc_fd_body<false, TC_FD_PD16>(part + (size_t)s * T * rows, mat, rows, cols, 0, 0, min(TC_BM, T - t0), nullptr, nullptr,
	                              t0, tile * TC_BN, s * per, (s + 1) * per, TcSplitX{hi, lo, inv});
}

// tc_route_groups groups a batched prefill's routing by expert on the
// device (backend.DeviceRouting; runtime/cuda routed.go), so that the host
// need not read each layer's top-k back before the expert matmuls: ids
// [P] (router_topk_rows's) are the P = T x k routed experts of slots
// s = t x k + j. Pair p of
// the grouped order (experts in id order, each expert's slots increasing)
// gets tok[p] = s / k and slot[p] = s; iden[p] = p. The three tables
// [3][max_entries] (the gate, up and down matrices: the expert's record
// base bases[e] plus off0, off1, off2) hold an entry per tile pairs of
// each expert (tile: TC_BM), as runtime/cuda
// matmulTCGrouped writes them, then entries of count 0 up to max_entries
// (>= floor(P / tile) + min(E, P) covers any routing). A pair's products do not depend on which pairs share its
// entry, so the grouped kernels give it the bits of the host-built table.
// An id outside 0..E-1 is left out (the host's read back of the ids fails
// on it). With ids_host set (mapped host memory) the block then copies ids
// there, fences (system scope) and writes seq to *seq_host, so the host
// learns the routing without a copy or an event on the stream. With staged
// set (P <= TC_ROUTE_PMAX) the ids are read from global memory once, into
// shared memory: every warp's ballots over all P slots then wait on shared
// loads, not on a global load each 32 slots (at P = 4,096 that chain was
// most of the kernel's ~45 µs). One block of 1024 threads; E <=
// TC_ROUTE_EMAX; dynamic shared memory TC_ROUTE_SMEM(staged ? P : 0) (the
// emulator's mmtc runs it: it has no static shared arrays).
#define TC_ROUTE_EMAX 256
#define TC_ROUTE_PMAX 8192
#define TC_ROUTE_SMEM(P) ((3 * TC_ROUTE_EMAX + 2 + (P)) * 4)
extern "C" __global__ void __launch_bounds__(1024)
    tc_route_groups(const int* __restrict__ ids, int P, int k, int E, const unsigned long long* __restrict__ bases,
                    long long off0, long long off1, long long off2, int tile, int max_entries, int* tok, int* slot, int* iden,
                    tc_group* tab, int* ids_host, volatile unsigned* seq_host, unsigned seq, int staged) {
	int* cnt = reinterpret_cast<int*>(xs_smem);
	int* base = cnt + TC_ROUTE_EMAX;
	int* ebase = base + TC_ROUTE_EMAX + 1;
	int* sid = ebase + TC_ROUTE_EMAX + 1;  // the P ids (staged)
	const int* rid = staged ? sid : ids;   // where the ballots read them
	grid_dep_enter();
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
	for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
	__syncthreads();
	for (int s = tid; s < P; s += blockDim.x) {
		const int e = ids[s];
		if (staged) sid[s] = e;
		if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
	}
	__syncthreads();
	if (tid == 0) {
		int p = 0, n = 0;
		for (int e = 0; e < E; e++) {
			base[e] = p, ebase[e] = n;
			p += cnt[e], n += (cnt[e] + tile - 1) / tile;
		}
		base[E] = p, ebase[E] = min(n, max_entries);
	}
	__syncthreads();
	const long long offs[3] = {off0, off1, off2};
	for (int e = warp; e < E; e += nw) {
		// Expert e's pairs in slot order: a ballot over each 32 slots.
		int run = base[e];
		for (int s0 = 0; s0 < P; s0 += 32) {
			const int s = s0 + lane;
			const bool m = s < P && rid[s] == e;
			const unsigned bal = __ballot_sync(0xffffffffu, m);
			if (m) {
				const int p = run + __popc(bal & ((1u << lane) - 1u));
				tok[p] = s / k;
				slot[p] = s;
			}
			run += __popc(bal);
		}
		// Its entries, a lane each.
		for (int c = lane; ebase[e] + c < ebase[e + 1] && c * tile < cnt[e]; c += 32) {
			const int n = ebase[e] + c;
			for (int w = 0; w < 3; w++)
				tab[w * max_entries + n] = tc_group{reinterpret_cast<const uint8_t*>(bases[e] + offs[w]), base[e] + c * tile,
				                                     min(tile, cnt[e] - c * tile)};
		}
	}
	for (int n = ebase[E] + tid; n < max_entries; n += blockDim.x)
		for (int w = 0; w < 3; w++) tab[w * max_entries + n] = tc_group{nullptr, 0, 0};
	for (int p = tid; p < P; p += blockDim.x) iden[p] = p;
	if (ids_host != nullptr) {
		for (int s = tid; s < P; s += blockDim.x) ids_host[s] = rid[s];
		__threadfence_system();  // this thread's ids before the block's barrier
		__syncthreads();
		if (tid == 0) *seq_host = seq;
	}
}

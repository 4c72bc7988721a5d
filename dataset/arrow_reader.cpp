// arrow_reader.cpp - Parquet and Arrow IPC inputs through Apache Arrow's own
// readers (the only C++ in the dataset library; its C API and contract are in
// arrow_reader.h). Built against the C++ libraries and headers the pyarrow
// wheel ships for extensions (CMakeLists.txt, MKS_ENABLE_ARROW).
//
// Hostile files: Arrow's readers parse the footer / flatbuffer metadata with
// their own checks and limits (thrift string and container limits set below,
// flatbuffer verification, max_recursion_depth); a Parquet string field's
// values come from Parquet's decoders, which check every length and
// dictionary index against the page, and its levels are checked against its
// values here (next_parquet_direct); every other piece is checked with
// ValidateFull before a row is read. Every buffer Arrow allocates for the file
// comes from a pool capped at mem_limit. Any exception is caught here: nothing
// C++ crosses the C boundary.
#include "arrow_reader.h"

#include <arrow/api.h>
#include <arrow/array/validate.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/column_reader.h>
#include <parquet/file_reader.h>
#include <parquet/properties.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

// Arrow's allocations for one file, counted and capped: a decompression bomb
// or a page header that claims gigabytes fails with OutOfMemory at the cap
// instead of taking the machine's memory.
class CappedPool : public arrow::MemoryPool {
  public:
    CappedPool() : base_(arrow::system_memory_pool()) {}
    // a fresh file: only for a pool with nothing allocated (pool_acquire)
    void reset(int64_t limit) {
        limit_ = limit;
        peak_ = piece_peak_ = total_ = n_ = 0;
    }
    bool in_use = false;
    using arrow::MemoryPool::Allocate;
    using arrow::MemoryPool::Free;
    using arrow::MemoryPool::Reallocate;
    arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t **out) override {
        if (!reserve(size)) return over(size);
        arrow::Status st = raw_alloc(size, alignment, out);
        if (!st.ok()) cur_ -= size;
        return st;
    }
    arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t **ptr) override {
        int64_t grow = new_size - old_size;
        if (grow > 0 && !reserve(grow)) return over(grow);
        arrow::Status st;
        bool ob = big(old_size, alignment), nb = big(new_size, alignment);
        if (!ob && !nb) {
            st = base_->Reallocate(old_size, new_size, alignment, ptr);
        } else if (ob && nb) {
            st = big_resize(ptr, new_size);
        } else { // across the threshold: the other kind of block (less than kBig bytes copied)
            uint8_t *q = nullptr;
            st = nb ? big_alloc(new_size, alignment, &q) : base_->Allocate(new_size, alignment, &q);
            if (st.ok()) {
                memcpy(q, *ptr, (size_t)std::min(old_size, new_size));
                if (ob) big_free(*ptr);
                else base_->Free(*ptr, old_size, alignment);
                *ptr = q;
            }
        }
        if (!st.ok()) {
            if (grow > 0) cur_ -= grow;
        } else if (grow < 0) {
            cur_ += grow;
        }
        return st;
    }
    void Free(uint8_t *buffer, int64_t size, int64_t alignment) override {
        if (big(size, alignment)) big_free(buffer);
        else base_->Free(buffer, size, alignment);
        cur_ -= size;
    }
    ~CappedPool() override { drop_cache(); }
    int64_t bytes_allocated() const override { return cur_; }
    int64_t max_memory() const override { return peak_; }
    int64_t total_bytes_allocated() const override { return total_; }
    int64_t num_allocations() const override { return n_; }
    std::string backend_name() const override { return "mkshards-capped(" + base_->backend_name() + ")"; }
    void reset_piece_peak() { piece_peak_ = cur_.load(); }
    int64_t piece_peak() const { return piece_peak_; }

  private:
    // Blocks of kBig bytes and more (a column's values and offsets, a
    // decompressed page, a compressed page read whole) are mappings of their
    // own, not malloc's: Arrow grows its builders and page buffers by
    // reallocation, which mremap does without copying and without touching
    // the pages again, and a freed block is kept (up to kCacheMax bytes) for
    // the next batch, whose buffers then reuse pages already faulted in.
    // Fresh pages (first touch, zeroed by the kernel) and the copies of
    // grow-by-doubling were what made Parquet input cost more CPU than the
    // same documents as JSONL (docs/reader.md). A block is big by its size
    // alone (Arrow passes the size to Free), so a reallocation across kBig
    // moves it to the other kind.
    static constexpr int64_t kBig = 1 << 20, kCacheMax = 64 << 20;
    static constexpr size_t kPage = 4096;
    struct Head { // at the mapping's start; the block starts head bytes after it (64, or the alignment asked)
        size_t map_len;
        size_t head;
    };
    static bool big(int64_t size, int64_t alignment) {
        return size >= kBig && alignment > 0 && alignment <= (int64_t)kPage && (alignment & (alignment - 1)) == 0;
    }
    static size_t head_size(int64_t alignment) { return std::max<size_t>((size_t)alignment, 64); }
    static Head *head_of(uint8_t *p) {
        // the head sits at the page start below the block (head_size <= kPage)
        return reinterpret_cast<Head *>(reinterpret_cast<uintptr_t>(p - 1) & ~(uintptr_t)(kPage - 1));
    }
    static size_t map_len_for(size_t head, int64_t size) { return (head + (size_t)size + kPage - 1) & ~(kPage - 1); }
    arrow::Status big_map(int64_t size, int64_t alignment, uint8_t **out) {
        size_t head = head_size(alignment), len = map_len_for(head, size);
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return arrow::Status::OutOfMemory("cannot map ", len, " bytes");
        Head *h = static_cast<Head *>(m);
        h->map_len = len;
        h->head = head;
        *out = static_cast<uint8_t *>(m) + head;
        return arrow::Status::OK();
    }
    arrow::Status big_alloc(int64_t size, int64_t alignment, uint8_t **out) {
        size_t head = head_size(alignment), need = map_len_for(head, size);
        {
            // the smallest cached block that holds it; else the largest, grown
            std::lock_guard<std::mutex> lk(cache_mu_);
            size_t best = cache_.size(), fit = cache_.size();
            for (size_t i = 0; i < cache_.size(); i++) {
                size_t len = head_of(cache_[i])->map_len;
                if (len >= need && (fit == cache_.size() || len < head_of(cache_[fit])->map_len)) fit = i;
                if (best == cache_.size() || len > head_of(cache_[best])->map_len) best = i;
            }
            if (fit < cache_.size()) best = fit;
            if (best < cache_.size()) {
                uint8_t *p = cache_[best];
                Head *h = head_of(p);
                cached_ -= (int64_t)h->map_len;
                cache_[best] = cache_.back();
                cache_.pop_back();
                if (h->head == head) {
                    *out = p;
                    if (h->map_len >= need) return arrow::Status::OK();
                    arrow::Status st = big_resize(out, size);
                    if (!st.ok()) munmap(h, h->map_len);
                    return st;
                }
                munmap(h, h->map_len);
            }
        }
        return big_map(size, alignment, out);
    }
    arrow::Status big_resize(uint8_t **ptr, int64_t new_size) {
        Head *h = head_of(*ptr);
        size_t head = h->head, need = map_len_for(head, new_size);
        if (need <= h->map_len) return arrow::Status::OK(); // shrinking: the pages stay (the block is kept whole)
        void *m = mremap(h, h->map_len, need, MREMAP_MAYMOVE);
        if (m == MAP_FAILED) return arrow::Status::OutOfMemory("cannot grow a mapping to ", need, " bytes");
        h = static_cast<Head *>(m);
        h->map_len = need;
        *ptr = static_cast<uint8_t *>(m) + head;
        return arrow::Status::OK();
    }
    void big_free(uint8_t *p) {
        Head *h = head_of(p);
        {
            std::lock_guard<std::mutex> lk(cache_mu_);
            if (cached_ + (int64_t)h->map_len <= kCacheMax) {
                try {
                    cache_.push_back(p);
                    cached_ += (int64_t)h->map_len;
                    return;
                } catch (...) {}
            }
        }
        munmap(h, h->map_len);
    }
    arrow::Status raw_alloc(int64_t size, int64_t alignment, uint8_t **out) {
        if (big(size, alignment)) return big_alloc(size, alignment, out);
        return base_->Allocate(size, alignment, out);
    }
    void drop_cache() {
        std::lock_guard<std::mutex> lk(cache_mu_);
        for (uint8_t *p : cache_) munmap(head_of(p), head_of(p)->map_len);
        cache_.clear();
        cached_ = 0;
    }
    std::mutex cache_mu_;
    std::vector<uint8_t *> cache_;
    int64_t cached_ = 0;

    bool reserve(int64_t size) {
        if (size < 0) return false;
        int64_t now = cur_ += size;
        if (limit_ > 0 && now > limit_) {
            cur_ -= size;
            return false;
        }
        total_ += size;
        n_++;
        if (now > peak_) peak_ = now;
        if (now > piece_peak_) piece_peak_ = now;
        return true;
    }
    arrow::Status over(int64_t size) const {
        return arrow::Status::OutOfMemory("an allocation of ", size, " bytes would pass the reader's ", limit_,
                                          "-byte memory cap for one file (", cur_.load(), " bytes held)");
    }
    arrow::MemoryPool *base_;
    int64_t limit_ = 0;
    std::atomic<int64_t> cur_{0};
    int64_t peak_ = 0, piece_peak_ = 0, total_ = 0, n_ = 0;
};

// Pools live as long as the process: Arrow's IPC file reader reads its
// footer on Arrow's I/O thread, and that thread may drop the last reference
// to a buffer (and free it into its pool) after ds_arrow_close returned.
// A pool is reused only once it is closed and holds nothing.
std::mutex g_pools_mu;
std::vector<CappedPool *> *g_pools = new std::vector<CappedPool *>; // never destroyed: see above

CappedPool *pool_acquire(int64_t limit) {
    std::lock_guard<std::mutex> lk(g_pools_mu);
    for (CappedPool *p : *g_pools)
        if (!p->in_use && p->bytes_allocated() == 0) {
            p->in_use = true;
            p->reset(limit);
            return p;
        }
    auto *p = new CappedPool();
    g_pools->push_back(p);
    p->in_use = true;
    p->reset(limit);
    return p;
}

void pool_release(CappedPool *p) {
    std::lock_guard<std::mutex> lk(g_pools_mu);
    p->in_use = false;
}

// Messages from Arrow may quote bytes of the file (field names, type
// strings): only printable ASCII goes into our reports.
void set_err(char *err, size_t errlen, const std::string &msg) {
    if (!err || !errlen) return;
    size_t n = 0;
    for (char ch : msg) {
        if (n + 1 >= errlen) break;
        unsigned char c = (unsigned char)ch;
        err[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : (c == '\n' ? ' ' : '?');
    }
    err[n] = 0;
}

std::string clean(const std::string &s, size_t max) {
    std::string o;
    for (char ch : s) {
        if (o.size() >= max) {
            o += "...";
            break;
        }
        unsigned char c = (unsigned char)ch;
        o += (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    return o;
}

bool is_string_type(arrow::Type::type t) {
    return t == arrow::Type::STRING || t == arrow::Type::LARGE_STRING || t == arrow::Type::STRING_VIEW;
}

// The same buffers typed as binary: ValidateFull then checks the offsets /
// views (what memory safety needs) but not UTF-8, which the pipeline checks
// per document (an invalid document is one reject, as in JSONL, not the loss
// of its whole row group).
std::shared_ptr<arrow::DataType> as_binary(const std::shared_ptr<arrow::DataType> &t) {
    switch (t->id()) {
    case arrow::Type::STRING: return arrow::binary();
    case arrow::Type::LARGE_STRING: return arrow::large_binary();
    case arrow::Type::STRING_VIEW: return arrow::binary_view();
    default: return t;
    }
}

std::shared_ptr<arrow::ArrayData> binary_view_of(const std::shared_ptr<arrow::ArrayData> &d) {
    auto c = d->Copy();
    if (c->type->id() == arrow::Type::DICTIONARY) {
        const auto &dt = static_cast<const arrow::DictionaryType &>(*c->type);
        c->type = arrow::dictionary(dt.index_type(), as_binary(dt.value_type()), dt.ordered());
        if (c->dictionary) c->dictionary = binary_view_of(c->dictionary);
    } else {
        c->type = as_binary(c->type);
    }
    return c;
}

// Chat formats read whole columns: every string type inside them (list
// items, struct fields, map keys) typed as binary, for the same reason.
std::shared_ptr<arrow::Field> deep_binary_field(const std::shared_ptr<arrow::Field> &f);
std::shared_ptr<arrow::DataType> deep_binary_type(const std::shared_ptr<arrow::DataType> &t) {
    switch (t->id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW: return as_binary(t);
    case arrow::Type::LIST:
        return arrow::list(deep_binary_field(static_cast<const arrow::ListType &>(*t).value_field()));
    case arrow::Type::LARGE_LIST:
        return arrow::large_list(deep_binary_field(static_cast<const arrow::LargeListType &>(*t).value_field()));
    case arrow::Type::FIXED_SIZE_LIST: {
        const auto &lt = static_cast<const arrow::FixedSizeListType &>(*t);
        return arrow::fixed_size_list(deep_binary_field(lt.value_field()), lt.list_size());
    }
    case arrow::Type::MAP: {
        const auto &mt = static_cast<const arrow::MapType &>(*t);
        auto r = arrow::MapType::Make(deep_binary_field(mt.value_field()), mt.keys_sorted());
        return r.ok() ? *r : t;
    }
    case arrow::Type::STRUCT: {
        arrow::FieldVector fs;
        for (const auto &f : t->fields()) fs.push_back(deep_binary_field(f));
        return arrow::struct_(fs);
    }
    case arrow::Type::DICTIONARY: {
        const auto &dt = static_cast<const arrow::DictionaryType &>(*t);
        return arrow::dictionary(dt.index_type(), deep_binary_type(dt.value_type()), dt.ordered());
    }
    default: return t;
    }
}
std::shared_ptr<arrow::Field> deep_binary_field(const std::shared_ptr<arrow::Field> &f) {
    return f->WithType(deep_binary_type(f->type()));
}
std::shared_ptr<arrow::ArrayData> deep_binary_data(const std::shared_ptr<arrow::ArrayData> &d) {
    if (!d) return d;
    auto c = d->Copy();
    c->type = deep_binary_type(d->type);
    for (auto &ch : c->child_data) ch = deep_binary_data(ch);
    if (c->dictionary) c->dictionary = deep_binary_data(c->dictionary);
    return c;
}

constexpr int64_t kDirectRows = 1024; // rows per piece on the direct path (one ReadBatch)

// One chunk of the text column: the arrays along the field's path.
struct Chunk {
    int64_t start = 0, length = 0;                   // rows of the piece it covers
    std::vector<std::shared_ptr<arrow::Array>> path; // path[k]: the array at depth k (fewer: the path broke)
    int broken = 0; // 0: the leaf is path.back(); 1: no such field; 2: a parent is not a struct
};

} // namespace

struct ds_arrow {
    explicit ds_arrow(int64_t limit) : pool(*pool_acquire(limit)) {}
    ~ds_arrow() {
        release_c();
        chunks.clear();
        rg_rows.reset();
        pq_col.reset();
        pq_rg.reset();
        pq.reset();
        ipc_file.reset();
        ipc_stream.reset();
        file.reset();
        pool_release(&pool);
    }
    CappedPool &pool;
    int format = 0;
    std::vector<std::string> parts;
    std::string name; // the field as given, for details
    std::shared_ptr<arrow::io::ReadableFile> file;
    // Parquet
    std::unique_ptr<parquet::arrow::FileReader> pq;
    int pq_leaf = -1; // leaf column index of the field; -1: none
    int pq_kind =
        0; // 0: a leaf; 1: missing; 2: a parent is not a struct; 3: the field is not a leaf (a struct, list, ...)
    std::string pq_type; // the field's type when pq_kind == 3 or the leaf is not a string
    int n_groups = 0;
    int group = -1;                                    // the row group being read
    int64_t group_rows = 0, group_done = 0;            // its rows, and those read so far
    std::unique_ptr<arrow::RecordBatchReader> rg_rows; // its batches (the field's column only)
    // A string field (the common case) is read with Parquet's column reader
    // instead: a piece is one ReadBatch of up to kDirectRows rows from one
    // page, and each row's text is the decoder's view into that page (or the
    // column chunk's dictionary), valid until the next ReadBatch. No Arrow
    // array is built, so the values are copied once (into the pipeline's
    // batch, as JSONL text is) instead of three times, and no builder's
    // memory is touched (docs/reader.md, Speed).
    bool pq_direct = false;
    int16_t pq_max_def = 0; // the leaf's max definition level: a row below it is null on the path
    std::shared_ptr<parquet::RowGroupReader> pq_rg;
    std::shared_ptr<parquet::ByteArrayReader> pq_col;
    std::vector<int16_t> pq_def;
    std::vector<parquet::ByteArray> pq_vals;
    int64_t pq_nvals = 0;                   // values in pq_vals for the loaded piece
    int64_t pq_cur_row = 0, pq_cur_val = 0; // ds_arrow_row's cursor: row pq_cur_row's value is pq_cur_val
    // IPC
    std::shared_ptr<arrow::ipc::RecordBatchFileReader> ipc_file;
    std::shared_ptr<arrow::RecordBatchReader> ipc_stream;
    int ipc_top = -1; // top-level field index of parts[0]; -1: missing
    int64_t n_batches = 0;
    // the loaded piece
    int64_t next = 0, piece = -1, rows = 0;
    int64_t row0 = 0; // the piece's first row within its row group
    std::vector<Chunk> chunks;
    size_t cur_chunk = 0;
    uint64_t largest = 0;
    std::string detail;
    // chat formats (ds_arrow_open_rows): whole rows of these columns
    bool rows_mode = false;
    std::vector<std::vector<std::string>> row_paths;
    std::vector<int> pq_leaves;   // Parquet: the leaf columns under the paths
    std::vector<int> ipc_columns; // IPC: the top-level columns the paths start at
    std::shared_ptr<arrow::RecordBatch> row_batch;
    struct ArrowSchema c_schema = {};
    struct ArrowArray c_array = {};
    void release_c() {
        if (c_array.release) c_array.release(&c_array);
        if (c_schema.release) c_schema.release(&c_schema);
        c_array = {};
        c_schema = {};
        row_batch.reset();
    }
};

namespace {

int fail(char *err, size_t errlen, const arrow::Status &st, const std::string &where) {
    set_err(err, errlen, where + st.ToString());
    /* OutOfMemory included: nearly always the pool's cap, i.e. this file */
    return DS_ARROW_DAMAGED;
}

// The arrays along the path, each checked before it is used: an array's
// structure (lengths, offsets, buffer sizes: Validate) before a child is
// sliced out of it (Arrow aborts on a bad slice, found by fuzz_arrow), and
// the leaf in full (ValidateFull, its offsets / views as binary).
arrow::Status make_chunk(const ds_arrow *a, const std::shared_ptr<arrow::Array> &top, int64_t start, Chunk *out) {
    Chunk &c = *out;
    ARROW_RETURN_NOT_OK(top->Validate());
    c.start = start;
    c.length = top->length();
    c.path.push_back(top);
    for (size_t k = 1; k < a->parts.size(); k++) {
        const auto &parent = c.path.back();
        if (parent->type_id() != arrow::Type::STRUCT) {
            c.broken = 2;
            return arrow::Status::OK();
        }
        auto child = static_cast<const arrow::StructArray &>(*parent).GetFieldByName(a->parts[k]);
        if (!child) {
            c.broken = 1;
            return arrow::Status::OK();
        }
        ARROW_RETURN_NOT_OK(child->Validate());
        c.path.push_back(child);
    }
    return arrow::MakeArray(binary_view_of(c.path.back()->data()))->ValidateFull();
}

int load_chunks(ds_arrow *a, const std::shared_ptr<arrow::ChunkedArray> &col, char *err, size_t errlen,
                const std::string &where) {
    int64_t start = 0;
    for (const auto &arr : col->chunks()) {
        Chunk c;
        arrow::Status st = make_chunk(a, arr, start, &c);
        if (!st.ok()) return fail(err, errlen, st, where);
        start += c.length;
        a->chunks.push_back(std::move(c));
    }
    if (start != a->rows) {
        set_err(err, errlen,
                where + "the column has " + std::to_string(start) + " rows, the piece " + std::to_string(a->rows));
        return DS_ARROW_DAMAGED;
    }
    return 1;
}

// Chat formats: the piece's columns checked in full (strings as bytes), then
// exported as Arrow C data for ds_ajson_row (C reads them).
int load_rows(ds_arrow *a, const std::shared_ptr<arrow::RecordBatch> &batch, char *err, size_t errlen,
              const std::string &where) {
    for (int k = 0; k < batch->num_columns(); k++) {
        // The column's ArrayData, validated as data: making an Array of an
        // invalid one (batch->column, MakeArray) aborts in Arrow's own
        // checks (a map whose keys hold a null), so nothing is made before
        // ValidateArrayFull has accepted it.
        const auto &data = batch->column_data(k);
        if (!data || data->length != a->rows) {
            set_err(err, errlen,
                    where + "a column has " + std::to_string(data ? data->length : 0) + " rows, the piece " +
                        std::to_string(a->rows));
            return DS_ARROW_DAMAGED;
        }
        arrow::Status st = arrow::internal::ValidateArrayFull(*deep_binary_data(data));
        if (!st.ok()) return fail(err, errlen, st, where);
    }
    arrow::Status st = arrow::ExportRecordBatch(*batch, &a->c_array, &a->c_schema);
    if (!st.ok()) return fail(err, errlen, st, where);
    a->row_batch = batch;
    return 1;
}

// The leaf columns under a schema node (all of a struct / list / map).
void collect_leaves(const parquet::arrow::SchemaField &f, std::vector<int> *out) {
    if (f.is_leaf()) {
        out->push_back(f.column_index);
        return;
    }
    for (const auto &c : f.children) collect_leaves(c, out);
}

int open_parquet(ds_arrow *a, char *err, size_t errlen) {
    parquet::ReaderProperties props(&a->pool);
    // Footer limits (parquet's defaults are 100 MB strings, 1M-entry
    // containers): metadata is read whole, so keep what a footer may make
    // the thrift decoder allocate small. Real footers are far below these.
    props.set_thrift_string_size_limit(16 << 20);
    props.set_thrift_container_size_limit(1 << 20);
    // pages that carry a CRC (writers' option) are checked against it
    props.set_page_checksum_verification(true);
    // pages read as they are decoded, not the column chunk whole
    props.enable_buffered_stream();
    props.set_buffer_size(1 << 20);
    parquet::ArrowReaderProperties aprops;
    aprops.set_use_threads(false);
    aprops.set_pre_buffer(false);
    // a row group is decoded in batches of this many rows: the pipeline's
    // workers get the first documents while the rest is still compressed,
    // and memory holds a batch, not the row group
    aprops.set_batch_size(1024);
    parquet::arrow::FileReaderBuilder b;
    arrow::Status st = b.Open(a->file, props);
    if (!st.ok()) return fail(err, errlen, st, "not a readable Parquet file: ");
    b.memory_pool(&a->pool)->properties(aprops);
    auto r = b.Build();
    if (!r.ok()) return fail(err, errlen, r.status(), "not a readable Parquet file: ");
    a->pq = std::move(*r);
    a->n_groups = a->pq->num_row_groups();
    if (a->rows_mode) {
        // every leaf under each path that names a column (a path into a
        // struct reads only that part of it: Arrow prunes the struct)
        for (const auto &path : a->row_paths) {
            const std::vector<parquet::arrow::SchemaField> *level = &a->pq->manifest().schema_fields;
            const parquet::arrow::SchemaField *f = nullptr;
            for (size_t k = 0; k < path.size(); k++) {
                if (k > 0 && f->field->type()->id() != arrow::Type::STRUCT) break; // the whole parent then
                const parquet::arrow::SchemaField *hit = nullptr;
                for (const auto &sf : *level)
                    if (sf.field->name() == path[k]) {
                        hit = &sf;
                        break;
                    }
                if (!hit) {
                    f = k > 0 ? f : nullptr; // a missing child: the parent struct, whose object lacks it
                    break;
                }
                f = hit;
                level = &f->children;
            }
            if (f) collect_leaves(*f, &a->pq_leaves);
        }
        std::sort(a->pq_leaves.begin(), a->pq_leaves.end());
        a->pq_leaves.erase(std::unique(a->pq_leaves.begin(), a->pq_leaves.end()), a->pq_leaves.end());
        a->pq_leaf = a->pq_leaves.empty() ? -1 : a->pq_leaves[0];
        a->pq_kind = a->pq_leaves.empty() ? 1 : 0;
        return 0;
    }
    // the field's leaf column, walking the schema tree by name
    const auto &fields = a->pq->manifest().schema_fields;
    const std::vector<parquet::arrow::SchemaField> *level = &fields;
    const parquet::arrow::SchemaField *f = nullptr;
    a->pq_kind = 0;
    for (size_t k = 0; k < a->parts.size(); k++) {
        if (k > 0 && f->field->type()->id() != arrow::Type::STRUCT) {
            a->pq_kind = 2;
            return 0;
        }
        const parquet::arrow::SchemaField *hit = nullptr;
        for (const auto &sf : *level)
            if (sf.field->name() == a->parts[k]) {
                hit = &sf;
                break;
            }
        if (!hit) {
            a->pq_kind = 1;
            return 0;
        }
        f = hit;
        level = &f->children;
    }
    if (!f->is_leaf()) {
        a->pq_kind = 3;
        a->pq_type = clean(f->field->type()->ToString(), 80);
        return 0;
    }
    a->pq_leaf = f->column_index;
    a->pq_type = clean(f->field->type()->ToString(), 80);
    // the direct path: a BYTE_ARRAY leaf that Arrow reads as a string (the
    // file's Arrow schema included: dictionary<string> too), outside any list
    const parquet::ColumnDescriptor *d = a->pq->parquet_reader()->metadata()->schema()->Column(f->column_index);
    const auto &ft = f->field->type();
    bool stringish = is_string_type(ft->id()) ||
                     (ft->id() == arrow::Type::DICTIONARY &&
                      is_string_type(static_cast<const arrow::DictionaryType &>(*ft).value_type()->id()));
    if (d->physical_type() == parquet::Type::BYTE_ARRAY && d->max_repetition_level() == 0 && stringish) {
        a->pq_direct = true;
        a->pq_max_def = d->max_definition_level();
        a->pq_def.resize(kDirectRows);
        a->pq_vals.resize(kDirectRows);
    }
    return 0;
}

// The text field's top-level column (-1: none); in rows mode the columns
// the paths start at (ipc_columns; -1 when there are none).
int ipc_columns(ds_arrow *a, const arrow::Schema &schema) {
    if (!a->rows_mode) return schema.GetFieldIndex(a->parts[0]);
    for (const auto &path : a->row_paths) {
        int k = schema.GetFieldIndex(path[0]);
        if (k >= 0 && std::find(a->ipc_columns.begin(), a->ipc_columns.end(), k) == a->ipc_columns.end())
            a->ipc_columns.push_back(k);
    }
    std::sort(a->ipc_columns.begin(), a->ipc_columns.end());
    return a->ipc_columns.empty() ? -1 : a->ipc_columns[0];
}

int open_ipc(ds_arrow *a, char *err, size_t errlen) {
    arrow::ipc::IpcReadOptions o = arrow::ipc::IpcReadOptions::Defaults();
    o.memory_pool = &a->pool;
    o.use_threads = false;
    uint8_t magic[6] = {0};
    auto got = a->file->ReadAt(0, 6, magic);
    if (!got.ok()) return fail(err, errlen, got.status(), "cannot read: ");
    bool file_format = *got == 6 && memcmp(magic, "ARROW1", 6) == 0;
    auto seek0 = a->file->Seek(0); // ReadAt leaves the stream position undefined
    if (!seek0.ok()) return fail(err, errlen, seek0, "cannot read: ");
    std::shared_ptr<arrow::Schema> schema;
    if (file_format) {
        auto r = arrow::ipc::RecordBatchFileReader::Open(a->file, o);
        if (!r.ok()) return fail(err, errlen, r.status(), "not a readable Arrow IPC file: ");
        a->ipc_file = *r;
        schema = a->ipc_file->schema();
        a->n_batches = a->ipc_file->num_record_batches();
    } else {
        // the stream format (what datasets caches): the schema message first
        auto r = arrow::ipc::RecordBatchStreamReader::Open(a->file, o);
        if (!r.ok()) return fail(err, errlen, r.status(), "not a readable Arrow IPC stream: ");
        schema = (*r)->schema();
        a->ipc_top = ipc_columns(a, *schema);
        if (schema->num_fields() > 0) {
            // reopen reading only the field's column (or any one, for the
            // row counts, when it is missing)
            auto seek = a->file->Seek(0);
            if (!seek.ok()) return fail(err, errlen, seek, "cannot read: ");
            o.included_fields = a->rows_mode && !a->ipc_columns.empty()
                                    ? a->ipc_columns
                                    : std::vector<int>{a->ipc_top >= 0 ? a->ipc_top : 0};
            auto r2 = arrow::ipc::RecordBatchStreamReader::Open(a->file, o);
            if (!r2.ok()) return fail(err, errlen, r2.status(), "not a readable Arrow IPC stream: ");
            a->ipc_stream = *r2;
        } else {
            a->ipc_stream = *r;
        }
        return 0;
    }
    a->ipc_top = ipc_columns(a, *schema);
    if (schema->num_fields() > 0) {
        o.included_fields = a->rows_mode && !a->ipc_columns.empty()
                                ? a->ipc_columns
                                : std::vector<int>{a->ipc_top >= 0 ? a->ipc_top : 0};
        auto seek = a->file->Seek(0);
        if (!seek.ok()) return fail(err, errlen, seek, "cannot read: ");
        auto r = arrow::ipc::RecordBatchFileReader::Open(a->file, o);
        if (!r.ok()) return fail(err, errlen, r.status(), "not a readable Arrow IPC file: ");
        a->ipc_file = *r;
    }
    return 0;
}

// A row group read to its end must have held the rows its metadata says.
static bool group_rows_match(const ds_arrow *a, const std::string &where, char *err, size_t errlen) {
    if (a->group_done == a->group_rows) return true;
    set_err(err, errlen,
            where + "the column has " + std::to_string(a->group_done) + " rows, the row group " +
                std::to_string(a->group_rows));
    return false;
}

// Moves to the next row group (its index in *g): 1, or 0 when none is left,
// or DS_ARROW_DAMAGED for a negative row count in the metadata.
static int group_begin(ds_arrow *a, int *g, char *err, size_t errlen) {
    if (a->next >= a->n_groups) return 0;
    *g = (int)a->next++;
    a->group = *g;
    a->group_done = 0;
    a->group_rows = a->pq->parquet_reader()->metadata()->RowGroup(*g)->num_rows();
    if (a->group_rows < 0) {
        set_err(err, errlen, "row group " + std::to_string(*g) + ": negative row count");
        return DS_ARROW_DAMAGED;
    }
    return 1;
}

// The next piece of a direct-path file (ds_arrow::pq_direct): one
// ReadBatch of the leaf's column reader. Levels and values are checked
// against each other here, whatever the decoder let through: a row is a
// value exactly when its definition level is the maximum, and there are
// exactly as many values as such rows.
int next_parquet_direct(ds_arrow *a, int64_t *rows, char *err, size_t errlen) {
    for (;;) {
        if (a->pq_col) {
            std::string where = "row group " + std::to_string(a->group) + ": ";
            int64_t n = 0, nv = 0;
            if (a->pq_col->HasNext())
                n = a->pq_col->ReadBatch(kDirectRows, a->pq_max_def > 0 ? a->pq_def.data() : nullptr, nullptr,
                                         a->pq_vals.data(), &nv);
            if (n > 0) {
                int64_t want = n;
                if (a->pq_max_def > 0) {
                    want = 0;
                    for (int64_t i = 0; i < n; i++) want += a->pq_def[i] == a->pq_max_def;
                }
                if (n > kDirectRows || nv != want) {
                    set_err(err, errlen,
                            where + "the column's levels say " + std::to_string(want) + " values, its reader read " +
                                std::to_string(nv));
                    return DS_ARROW_DAMAGED;
                }
                a->piece = a->group;
                a->row0 = a->group_done;
                a->rows = n;
                a->pq_nvals = nv;
                a->pq_cur_row = a->pq_cur_val = 0;
                a->group_done += n;
                if (a->group_done > a->group_rows) {
                    set_err(err, errlen,
                            where + "the column has more rows than the row group's " + std::to_string(a->group_rows));
                    return DS_ARROW_DAMAGED;
                }
                *rows = n;
                return 1;
            }
            a->pq_col.reset();
            a->pq_rg.reset();
            if (!group_rows_match(a, where, err, errlen)) return DS_ARROW_DAMAGED;
        }
        int g = 0, st = group_begin(a, &g, err, errlen);
        if (st <= 0) return st;
        if (a->group_rows == 0) continue;
        a->pq_rg = a->pq->parquet_reader()->RowGroup(g);
        a->pq_col = std::dynamic_pointer_cast<parquet::ByteArrayReader>(a->pq_rg->Column(a->pq_leaf));
        if (!a->pq_col) {
            set_err(err, errlen, "row group " + std::to_string(g) + ": the column is not BYTE_ARRAY");
            return DS_ARROW_DAMAGED;
        }
    }
}

int next_parquet(ds_arrow *a, int64_t *rows, char *err, size_t errlen) {
    if (a->pq_direct) return next_parquet_direct(a, rows, err, errlen);
    for (;;) {
        if (a->group >= 0 && a->rg_rows) {
            std::string where = "row group " + std::to_string(a->group) + ": ";
            std::shared_ptr<arrow::RecordBatch> batch;
            arrow::Status st = a->rg_rows->ReadNext(&batch);
            if (!st.ok()) return fail(err, errlen, st, where);
            if (batch) {
                a->piece = a->group;
                a->row0 = a->group_done;
                a->rows = batch->num_rows();
                a->group_done += a->rows;
                if (a->group_done > a->group_rows || (!a->rows_mode && batch->num_columns() != 1)) {
                    set_err(err, errlen,
                            where + "the column has more rows than the row group's " + std::to_string(a->group_rows));
                    return DS_ARROW_DAMAGED;
                }
                *rows = a->rows;
                if (a->rows_mode) return load_rows(a, batch, err, errlen, where);
                auto col = std::make_shared<arrow::ChunkedArray>(arrow::ArrayVector{batch->column(0)});
                return load_chunks(a, col, err, errlen, where);
            }
            a->rg_rows.reset();
            if (!group_rows_match(a, where, err, errlen)) return DS_ARROW_DAMAGED;
        }
        int g = 0, st = group_begin(a, &g, err, errlen);
        if (st <= 0) return st;
        if (a->pq_leaf < 0) { // every row reports the missing / non-leaf field; nothing to read
            a->piece = g;
            a->row0 = 0;
            a->rows = a->group_rows;
            *rows = a->rows;
            return 1;
        }
        if (a->group_rows == 0) continue;
        auto r = a->pq->GetRecordBatchReader(std::vector<int>{g},
                                             a->rows_mode ? a->pq_leaves : std::vector<int>{a->pq_leaf});
        if (!r.ok()) return fail(err, errlen, r.status(), "row group " + std::to_string(g) + ": ");
        a->rg_rows = std::move(*r);
    }
}

int next_ipc(ds_arrow *a, int64_t *rows, char *err, size_t errlen) {
    std::shared_ptr<arrow::RecordBatch> batch;
    std::string where = "record batch " + std::to_string(a->next) + ": ";
    if (a->ipc_file) {
        if (a->next >= a->n_batches) return 0;
        auto r = a->ipc_file->ReadRecordBatch((int)a->next);
        if (!r.ok()) return fail(err, errlen, r.status(), where);
        batch = *r;
    } else if (a->ipc_stream) {
        arrow::Status st = a->ipc_stream->ReadNext(&batch);
        if (!st.ok()) return fail(err, errlen, st, where);
        if (!batch) return 0;
        a->n_batches = a->next + 1;
    } else {
        return 0; // a file format IPC file whose schema has no fields: no rows to number
    }
    a->piece = a->next++;
    a->row0 = 0;
    a->rows = batch->num_rows();
    *rows = a->rows;
    if (a->ipc_top < 0) return 1;
    if (a->rows_mode) {
        if (batch->num_columns() != (int)a->ipc_columns.size()) {
            set_err(err, errlen, where + "the reader returned " + std::to_string(batch->num_columns()) + " columns");
            return DS_ARROW_DAMAGED;
        }
        return load_rows(a, batch, err, errlen, where);
    }
    if (batch->num_columns() != 1) {
        set_err(err, errlen, where + "the reader returned " + std::to_string(batch->num_columns()) + " columns");
        return DS_ARROW_DAMAGED;
    }
    auto col = std::make_shared<arrow::ChunkedArray>(arrow::ArrayVector{batch->column(0)});
    return load_chunks(a, col, err, errlen, where);
}

} // namespace

extern "C" {

static int ds_arrow_open_impl(int fd, int format, const char *const *parts, size_t n_parts, uint64_t mem_limit,
                              ds_arrow **out, char *err, size_t errlen,
                              std::vector<std::vector<std::string>> *row_paths) {
    *out = nullptr;
    if (err && errlen) err[0] = 0;
    ds_arrow *a = nullptr;
    try {
        a = new ds_arrow((int64_t)std::min<uint64_t>(mem_limit, (uint64_t)INT64_MAX));
        a->format = format;
        for (size_t i = 0; i < n_parts; i++) {
            if (i) a->name += '.';
            a->name += parts[i];
            a->parts.emplace_back(parts[i]);
        }
        if (a->parts.empty()) a->parts.emplace_back("text"), a->name = "text";
        if (row_paths) {
            a->rows_mode = true;
            a->row_paths = std::move(*row_paths);
        }
        auto f = arrow::io::ReadableFile::Open(fd, &a->pool);
        if (!f.ok()) {
            close(fd);
            delete a;
            return fail(err, errlen, f.status(), "cannot open: ");
        }
        a->file = *f; // owns fd now
        int rc = format == DS_ARROW_FMT_PARQUET ? open_parquet(a, err, errlen) : open_ipc(a, err, errlen);
        if (rc < 0) {
            delete a;
            return rc;
        }
        *out = a;
        return 0;
    } catch (const std::bad_alloc &) {
        delete a;
        set_err(err, errlen, "out of memory");
        return DS_ARROW_NOMEM;
    } catch (const std::exception &e) {
        delete a;
        set_err(err, errlen, std::string("not a readable file: ") + e.what());
        return DS_ARROW_DAMAGED;
    } catch (...) {
        delete a;
        set_err(err, errlen, "not a readable file (unknown C++ exception)");
        return DS_ARROW_DAMAGED;
    }
}

int ds_arrow_open_rows(int fd, int format, const char *const *paths, size_t n_paths, uint64_t mem_limit, ds_arrow **out,
                       char *err, size_t errlen) {
    *out = nullptr;
    std::vector<std::vector<std::string>> rp;
    try {
        for (size_t i = 0; i < n_paths; i++) {
            std::vector<std::string> parts;
            std::string s = paths[i], cur;
            for (char ch : s) {
                if (ch == '.') parts.push_back(cur), cur.clear();
                else cur += ch;
            }
            parts.push_back(cur);
            rp.push_back(parts);
        }
    } catch (...) {
        close(fd);
        set_err(err, errlen, "out of memory");
        return DS_ARROW_NOMEM;
    }
    const char *first = n_paths ? "" : "text";
    // the text field's machinery stays unused: parts is a placeholder
    int rc = ds_arrow_open_impl(fd, format, &first, 1, mem_limit, out, err, errlen, &rp);
    return rc;
}

int ds_arrow_piece_c(ds_arrow *a, const struct ArrowSchema **sc, const struct ArrowArray **arr) {
    *sc = nullptr;
    *arr = nullptr;
    if (!a->rows_mode || !a->c_array.release) return -1;
    *sc = &a->c_schema;
    *arr = &a->c_array;
    return 0;
}

int ds_arrow_open(int fd, int format, const char *const *parts, size_t n_parts, uint64_t mem_limit, ds_arrow **out,
                  char *err, size_t errlen) {
    return ds_arrow_open_impl(fd, format, parts, n_parts, mem_limit, out, err, errlen, nullptr);
}

int ds_arrow_next_piece(ds_arrow *a, int64_t *rows, char *err, size_t errlen) {
    *rows = 0;
    try {
        a->chunks.clear(); // the previous piece's buffers go back first
        a->release_c();
        a->cur_chunk = 0;
        a->rows = 0;
        a->pool.reset_piece_peak();
        int rc =
            a->format == DS_ARROW_FMT_PARQUET ? next_parquet(a, rows, err, errlen) : next_ipc(a, rows, err, errlen);
        if (rc < 0) a->chunks.clear();
        if ((uint64_t)a->pool.piece_peak() > a->largest) a->largest = (uint64_t)a->pool.piece_peak();
        return rc;
    } catch (const std::bad_alloc &) {
        a->chunks.clear();
        set_err(err, errlen, "out of memory");
        return DS_ARROW_NOMEM;
    } catch (const std::exception &e) {
        a->chunks.clear();
        set_err(err, errlen,
                std::string(a->format == DS_ARROW_FMT_PARQUET ? "row group " : "record batch ") +
                    std::to_string(a->next - 1) + ": " + e.what());
        return DS_ARROW_DAMAGED;
    } catch (...) {
        a->chunks.clear();
        set_err(err, errlen, "unknown C++ exception");
        return DS_ARROW_DAMAGED;
    }
}

int ds_arrow_row(ds_arrow *a, int64_t i, const uint8_t **text, size_t *len, const char **detail) {
    *text = nullptr;
    *len = 0;
    *detail = nullptr;
    try {
        if (a->format == DS_ARROW_FMT_PARQUET && a->pq_leaf < 0) {
            a->detail = a->pq_kind == 1   ? "no field '" + clean(a->name, 120) + "'"
                        : a->pq_kind == 2 ? std::string("parent of the field is not an object")
                                          : "field '" + clean(a->name, 120) + "' is " + a->pq_type + ", not a string";
            *detail = a->detail.c_str();
            return a->pq_kind == 3 ? DS_ARROW_ROW_NOT_STRING : DS_ARROW_ROW_MISSING;
        }
        if (a->pq_direct) {
            if (i < 0 || i >= a->rows) {
                a->detail = "row out of range";
                *detail = a->detail.c_str();
                return DS_ARROW_ROW_MISSING;
            }
            // rows are asked for in order: the cursor moves forward
            if (i < a->pq_cur_row) a->pq_cur_row = a->pq_cur_val = 0;
            for (; a->pq_cur_row < i; a->pq_cur_row++)
                a->pq_cur_val += a->pq_max_def == 0 || a->pq_def[a->pq_cur_row] == a->pq_max_def;
            if ((a->pq_max_def > 0 && a->pq_def[i] != a->pq_max_def) || a->pq_cur_val >= a->pq_nvals) {
                a->detail = "field '" + clean(a->name, 120) + "' is null";
                *detail = a->detail.c_str();
                return DS_ARROW_ROW_MISSING;
            }
            const parquet::ByteArray &v = a->pq_vals[a->pq_cur_val];
            *text = v.ptr;
            *len = v.len;
            return DS_ARROW_ROW_TEXT;
        }
        if (a->format == DS_ARROW_FMT_IPC && a->ipc_top < 0) {
            a->detail = "no field '" + clean(a->name, 120) + "'";
            *detail = a->detail.c_str();
            return DS_ARROW_ROW_MISSING;
        }
        // rows are asked for in order: the cursor moves forward
        if (a->cur_chunk >= a->chunks.size() || i < a->chunks[a->cur_chunk].start) a->cur_chunk = 0;
        while (a->cur_chunk < a->chunks.size() && i >= a->chunks[a->cur_chunk].start + a->chunks[a->cur_chunk].length)
            a->cur_chunk++;
        if (a->cur_chunk >= a->chunks.size() || i < 0) {
            a->detail = "row out of range";
            *detail = a->detail.c_str();
            return DS_ARROW_ROW_MISSING;
        }
        const Chunk &c = a->chunks[a->cur_chunk];
        int64_t j = i - c.start;
        for (const auto &arr : c.path)
            if (arr->IsNull(j)) {
                a->detail = "field '" + clean(a->name, 120) + "' is null";
                *detail = a->detail.c_str();
                return DS_ARROW_ROW_MISSING;
            }
        if (c.broken) {
            a->detail = c.broken == 1 ? "no field '" + clean(a->name, 120) + "'"
                                      : std::string("parent of the field is not an object");
            *detail = a->detail.c_str();
            return DS_ARROW_ROW_MISSING;
        }
        const arrow::Array *leaf = c.path.back().get();
        int64_t k = j;
        if (leaf->type_id() == arrow::Type::DICTIONARY) {
            const auto &d = static_cast<const arrow::DictionaryArray &>(*leaf);
            if (is_string_type(d.dictionary()->type_id())) {
                k = d.GetValueIndex(j);
                leaf = d.dictionary().get();
                if (k < 0 || k >= leaf->length()) {
                    a->detail = "dictionary index out of range";
                    *detail = a->detail.c_str();
                    return DS_ARROW_ROW_MISSING;
                }
                if (leaf->IsNull(k)) {
                    a->detail = "field '" + clean(a->name, 120) + "' is null";
                    *detail = a->detail.c_str();
                    return DS_ARROW_ROW_MISSING;
                }
            }
        }
        std::string_view v;
        switch (leaf->type_id()) {
        case arrow::Type::STRING: v = static_cast<const arrow::StringArray *>(leaf)->GetView(k); break;
        case arrow::Type::LARGE_STRING: v = static_cast<const arrow::LargeStringArray *>(leaf)->GetView(k); break;
        case arrow::Type::STRING_VIEW: v = static_cast<const arrow::StringViewArray *>(leaf)->GetView(k); break;
        default:
            a->detail = "field '" + clean(a->name, 120) + "' is " + clean(c.path.back()->type()->ToString(), 80) +
                        ", not a string";
            *detail = a->detail.c_str();
            return DS_ARROW_ROW_NOT_STRING;
        }
        *text = reinterpret_cast<const uint8_t *>(v.data());
        *len = v.size();
        return DS_ARROW_ROW_TEXT;
    } catch (...) {
        a->detail = "unreadable row";
        *detail = a->detail.c_str();
        return DS_ARROW_ROW_MISSING;
    }
}

uint64_t ds_arrow_piece_index(const ds_arrow *a) { return a->piece < 0 ? 0 : (uint64_t)a->piece; }
uint64_t ds_arrow_piece_row0(const ds_arrow *a) { return (uint64_t)a->row0; }
uint64_t ds_arrow_n_pieces(const ds_arrow *a) {
    return a->format == DS_ARROW_FMT_PARQUET ? (uint64_t)a->n_groups : (uint64_t)a->n_batches;
}
uint64_t ds_arrow_peak_bytes(const ds_arrow *a) { return (uint64_t)a->pool.max_memory(); }
uint64_t ds_arrow_largest_piece(const ds_arrow *a) { return a->largest; }

void ds_arrow_close(ds_arrow *a) {
    if (!a) return;
    try {
        a->release_c();
        a->chunks.clear();
        a->rg_rows.reset();
        a->pq_col.reset();
        a->pq_rg.reset();
        a->pq.reset();
        a->ipc_file.reset();
        a->ipc_stream.reset();
        if (a->file) (void)a->file->Close();
        a->file.reset();
        delete a;
    } catch (...) {}
}

const char *ds_arrow_version(void) {
    static char v[64];
    if (!v[0]) snprintf(v, sizeof v, "Arrow %s", arrow::GetBuildInfo().version_string.c_str());
    return v;
}

} // extern "C"

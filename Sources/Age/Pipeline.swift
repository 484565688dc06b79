import Dispatch
import Foundation

extension AgeStream {
    /// The one batch pipeline behind sealing and opening the payload.
    ///
    /// Each round takes a batch of chunks already read, and runs, on every core at once
    /// (`DispatchQueue.concurrentPerform`), one job per chunk (`process`: seal or open it into the output
    /// buffer) plus one job that reads the next batch into the other pair of buffers. Then, on the calling
    /// thread, `finish` writes or releases the batch in order. Batches start at one chunk and double up to
    /// ``maxBatchChunks``; memory is two pairs of buffers of at most that many chunks, whatever the size of
    /// the input. Each chunk is independent given its counter and last flag, which its position says: a
    /// batch ends in its file's last chunk only when reading it met the end of the input (one byte is
    /// read beyond every batch to know).
    final class Pipeline {
        /// One batch: its chunks in `input`, one `inputUnit` apart (the last may be shorter), and room
        /// for their results in `output`, one `outputUnit` apart.
        struct Batch {
            let input: UnsafeMutableRawBufferPointer
            let output: UnsafeMutableRawBufferPointer
            let inputUnit: Int
            let outputUnit: Int
            /// Bytes of input in the batch's chunks (not counting the byte read beyond them).
            let inputCount: Int
            let chunkCount: Int
            /// Whether the batch ends with the last chunk of the file.
            let isFinal: Bool
            let firstCounter: UInt64

            func inputChunk(_ index: Int) -> UnsafeRawBufferPointer {
                let start = index * inputUnit
                return UnsafeRawBufferPointer(rebasing: input[start..<min(start + inputUnit, inputCount)])
            }

            func outputChunk(_ index: Int, count: Int) -> UnsafeMutableRawBufferPointer {
                precondition(count <= outputUnit)
                let start = index * outputUnit
                return UnsafeMutableRawBufferPointer(rebasing: output[start..<(start + count)])
            }

            /// Whether chunk `index` is the file's last (nonce flag 1).
            func isLastChunk(_ index: Int) -> Bool { isFinal && index == chunkCount - 1 }

            /// The byte read beyond the chunks of a batch that is not final: the start of the next one.
            var lookahead: UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: input[inputCount..<(isFinal ? inputCount : inputCount + 1)])
            }
        }

        /// Memory reused from batch to batch, freed with the pipeline. It is sized for one chunk at first
        /// (a small input allocates no more), then straight for the largest batch: growing step by step
        /// would leave the smaller buffers resident in the allocator's heap.
        final class Buffers {
            private(set) var input = UnsafeMutableRawBufferPointer(start: nil, count: 0)
            private(set) var output = UnsafeMutableRawBufferPointer(start: nil, count: 0)

            func reserve(chunks: Int, inputUnit: Int, outputUnit: Int) {
                let capacity = chunks <= 1 ? 1 : maxBatchChunks
                if input.count < chunks * inputUnit + 1 {
                    input.deallocate()
                    input = .allocate(byteCount: capacity * inputUnit + 1, alignment: 64)
                }
                if output.count < chunks * outputUnit {
                    output.deallocate()
                    output = .allocate(byteCount: capacity * outputUnit, alignment: 64)
                }
            }

            deinit {
                input.deallocate()
                output.deallocate()
            }
        }

        private let input: ByteInput
        private let inputUnit: Int
        private let outputUnit: Int
        private let buffers = [Buffers(), Buffers()]

        init(input: ByteInput, inputUnit: Int, outputUnit: Int) {
            self.input = input
            self.inputUnit = inputUnit
            self.outputUnit = outputUnit
        }

        /// Reads the batch of up to `chunks` chunks that starts with `lookahead` into `buffers`.
        private func read(
            chunks: Int, after lookahead: UnsafeRawBufferPointer, into buffers: Buffers, firstCounter: UInt64
        ) throws -> Batch {
            let wanted = chunks * inputUnit + 1
            buffers.reserve(chunks: chunks, inputUnit: inputUnit, outputUnit: outputUnit)
            let memory = buffers.input
            UnsafeMutableRawBufferPointer(rebasing: memory[..<lookahead.count]).copyMemory(from: lookahead)
            let filled =
                lookahead.count
                + (try input.read(into: UnsafeMutableRawBufferPointer(rebasing: memory[lookahead.count..<wanted])))
            let isFinal = filled < wanted
            let inputCount = isFinal ? filled : wanted - 1
            return Batch(
                input: memory, output: buffers.output, inputUnit: inputUnit, outputUnit: outputUnit,
                inputCount: inputCount,
                chunkCount: isFinal ? max(1, (filled + inputUnit - 1) / inputUnit) : chunks,
                isFinal: isFinal, firstCounter: firstCounter)
        }

        /// Runs the pipeline to the end of the input.
        ///
        /// - `process(batch, index)` seals or opens one chunk; it runs on any thread, alongside the other
        ///   chunks of the batch, and returns whether the chunk verified.
        /// - `finish(batch, verified)` runs on the calling thread once the whole batch is processed, and
        ///   returns whether to go on. An error from `process` is thrown before `finish` sees the batch;
        ///   an error reading the next batch, after.
        func run(
            process: (Batch, Int) throws -> Bool, finish: (Batch, [Bool]) throws -> Bool
        ) throws {
            var current = try read(
                chunks: 1, after: UnsafeRawBufferPointer(start: nil, count: 0), into: buffers[0], firstCounter: 0)
            var side = 0
            while true {
                let batch = current
                let readsNext = !batch.isFinal
                let nextBuffers = buffers[1 - side]
                let nextChunks = min(batch.chunkCount * 2, maxBatchChunks)
                let jobs = Jobs(count: batch.chunkCount)
                let readJob = readsNext ? 1 : 0
                func runJob(_ job: Int) {
                    if job < readJob {
                        // The first job, so the read starts at once and overlaps the chunks.
                        jobs.next = Result {
                            try self.read(
                                chunks: nextChunks, after: batch.lookahead, into: nextBuffers,
                                firstCounter: batch.firstCounter &+ UInt64(batch.chunkCount))
                        }
                    } else {
                        let index = job - readJob
                        do {
                            jobs.verified[index] = try process(batch, index)
                        } catch {
                            jobs.errors[index] = error
                        }
                    }
                }
                let jobCount = batch.chunkCount + readJob
                if jobCount == 1 {
                    runJob(0)
                } else {
                    withoutActuallyEscaping(runJob) { runJob in
                        let shared = UncheckedSendable(runJob)
                        DispatchQueue.concurrentPerform(iterations: jobCount) { shared.value($0) }
                    }
                }
                if let error = jobs.errors.lazy.compactMap({ $0 }).first { throw error }
                guard try finish(batch, Array(jobs.verified)), let next = jobs.next else { return }
                current = try next.get()
                side = 1 - side
            }
        }
    }

    /// What the jobs of one round report. Each job writes only its own element (or `next`), and the calling
    /// thread reads them after `concurrentPerform` returns, which orders those writes before the reads.
    private final class Jobs {
        let verified: UnsafeMutableBufferPointer<Bool>
        let errors: UnsafeMutableBufferPointer<(any Error)?>
        var next: Result<Pipeline.Batch, any Error>?

        init(count: Int) {
            verified = .allocate(capacity: count)
            verified.initialize(repeating: false)
            errors = .allocate(capacity: count)
            errors.initialize(repeating: nil)
        }

        deinit {
            verified.deallocate()
            _ = errors.deinitialize()
            errors.deallocate()
        }
    }
}

/// Hands the round's job function to `concurrentPerform`'s threads. @unchecked: what the function
/// captures is either only read during the round (the batch, the key, `process`) or written by one job
/// each (``AgeStream/Jobs``'s elements; the input and the next batch's buffers, which only the read job
/// touches); `concurrentPerform` returns only after every job has ended.
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

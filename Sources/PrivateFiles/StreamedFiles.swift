import Foundation
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

extension PrivateFiles {
    /// A new private file (mode 0600) written in pieces, which appears at its name only whole and never replaces a
    /// file there: the pieces go to a temporary file beside it (created exclusively), which ``commit()`` syncs and
    /// links into place (link(2) fails where rename(2) would replace), then removes. For exports a person names,
    /// where overwriting their file would lose it.
    public final class NewFile {
        public let url: URL
        private let temporary: URL
        private var descriptor: Int32
        /// Bytes written so far.
        public private(set) var byteCount: UInt64 = 0

        public init(_ url: URL) throws(PrivateFilesError) {
            self.url = url
            let directory = url.deletingLastPathComponent()
            temporary = directory.appendingPathComponent(
                ".\(url.lastPathComponent).partial-\(String(UInt64.random(in: .min ... .max), radix: 16))")
            guard access(url.path, F_OK) != 0 else {
                throw .io("\(url.path) exists already; choose another name, or move it away first")
            }
            descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw .io("cannot create a file in \(directory.path): \(String(cString: strerror(errno)))")
            }
        }

        deinit { abort() }

        /// Appends `data`.
        public func write(_ data: some DataProtocol) throws(PrivateFilesError) {
            guard descriptor >= 0 else { throw .io("\(url.path) was already finished or abandoned") }
            try PrivateFiles.writeAll(data, to: descriptor, path: url.path)
            byteCount += UInt64(data.count)
        }

        /// Syncs the file and puts it at its name; fails, leaving nothing, if a file appeared there meanwhile.
        public func commit() throws(PrivateFilesError) {
            guard descriptor >= 0 else { throw .io("\(url.path) was already finished or abandoned") }
            defer { abort() }
            guard fsync(descriptor) == 0 else {
                throw .io("cannot sync \(url.path): \(String(cString: strerror(errno))) (is the disk full?)")
            }
            guard link(temporary.path, url.path) == 0 else {
                let reason = errno == EEXIST ? "a file appeared there meanwhile" : String(cString: strerror(errno))
                throw .io("cannot create \(url.path): \(reason)")
            }
            try PrivateFiles.syncDirectory(url.deletingLastPathComponent())
        }

        /// Drops what was written; the name is left as it was.
        public func abort() {
            guard descriptor >= 0 else { return }
            close(descriptor)
            descriptor = -1
            unlink(temporary.path)
        }
    }

    /// A private file (mode 0600) that pieces are added to at its end, created if needed: a download kept across
    /// runs, which goes on from what is there.
    public final class AppendFile {
        public let url: URL
        private var descriptor: Int32

        public init(_ url: URL) throws(PrivateFilesError) {
            self.url = url
            descriptor = open(url.path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw .io("cannot write \(url.path): \(String(cString: strerror(errno)))") }
        }

        deinit { close() }

        public func append(_ data: some DataProtocol) throws(PrivateFilesError) {
            guard descriptor >= 0 else { throw .io("\(url.path) was already closed") }
            try PrivateFiles.writeAll(data, to: descriptor, path: url.path)
        }

        public func close() {
            guard descriptor >= 0 else { return }
            Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// Writes all of `data` to `descriptor`, retrying short writes and EINTR.
    static func writeAll(_ data: some DataProtocol, to descriptor: Int32, path: String) throws(PrivateFilesError) {
        var failure: Int32 = 0
        for region in data.regions {
            region.withUnsafeBytes { buffer in
                var written = 0
                while written < buffer.count && failure == 0 {
                    let count = retryingInterrupts {
                        Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                    }
                    if count < 0 {
                        failure = errno
                        continue
                    }
                    written += count
                }
            }
            if failure != 0 { break }
        }
        guard failure == 0 else {
            throw .io("cannot write \(path): \(String(cString: strerror(failure))) (is the disk full?)")
        }
    }

    /// A file read in pieces, with errors that say which file.
    public final class FileReader {
        public let url: URL
        private let descriptor: Int32

        public init(_ url: URL) throws(PrivateFilesError) {
            self.url = url
            descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw .io("cannot open \(url.path): \(String(cString: strerror(errno)))") }
        }

        deinit { close(descriptor) }

        /// Up to `count` bytes, fewer only at the end; empty at the end.
        public func read(upTo count: Int) throws(PrivateFilesError) -> Data {
            var data = Data(count: count)
            var filled = 0
            var failure: Int32 = 0
            data.withUnsafeMutableBytes { buffer in
                while filled < count {
                    let got = retryingInterrupts {
                        Glibc.read(descriptor, buffer.baseAddress! + filled, count - filled)
                    }
                    if got < 0 {
                        failure = errno
                        return
                    }
                    if got == 0 { return }
                    filled += got
                }
            }
            guard failure == 0 else { throw .io("cannot read \(url.path): \(String(cString: strerror(failure)))") }
            data.count = filled
            return data
        }
    }
}

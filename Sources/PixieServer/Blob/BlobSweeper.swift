import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#endif

extension BlobService {
    /// Deletes every blob whose TTL has passed (row and file) and the budgets of past hours; returns how many
    /// blobs it deleted. ``runSweeper()`` calls it every ``Configuration/sweepInterval``.
    @discardableResult
    public func sweep() throws -> Int {
        let now = clock.now().unixSeconds
        let expired = try database.query("SELECT blob_id FROM blobs WHERE expires_at <= ?", [.integer(now)])
            .map { row throws(StorageError) in try row.string("blob_id") }
        var deleted = 0
        for blobID in expired {
            // The row goes first: a GET that still finds the file also finds no row, and answers 404.
            guard try database.execute("DELETE FROM blobs WHERE blob_id = ?", [.text(blobID)]) > 0 else { continue }
            unlink(configuration.directory.appendingPathComponent(blobID).path)
            deleted += 1
        }
        try database.execute("DELETE FROM blob_budgets WHERE window_start < ?", [.integer(Self.window(clock.now()))])
        if deleted > 0 {
            metrics.increment("pixie_blob_deleted_total", by: Double(deleted), labels: ["reason": "expired"])
            logger.info("swept expired blobs", ["count": deleted])
        }
        return deleted
    }

    /// Removes what a crash can leave behind: files in `tmp/` of uploads no longer running, and blob files
    /// with no row (renamed into place, then the row was never written). Runs when the sweeper starts.
    @discardableResult
    public func removeOrphans() throws -> Int {
        let manager = FileManager.default
        let directory = configuration.directory
        var removed = 0
        let temporary = directory.appendingPathComponent("tmp", isDirectory: true)
        for name in (try? manager.contentsOfDirectory(atPath: temporary.path)) ?? [] where !inFlight.contains(name) {
            if unlink(temporary.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        for name in (try? manager.contentsOfDirectory(atPath: directory.path)) ?? []
        where Self.isWellFormed(name) && !inFlight.contains(name) {
            let known = try database.queryOne("SELECT 1 AS known FROM blobs WHERE blob_id = ?", [.text(name)])
            if known == nil, !inFlight.contains(name), unlink(directory.appendingPathComponent(name).path) == 0 {
                removed += 1
            }
        }
        if removed > 0 { logger.warning("removed files left by interrupted uploads", ["count": removed]) }
        return removed
    }

    /// Removes orphans once, then sweeps every ``Configuration/sweepInterval`` until the task is cancelled.
    /// A failed sweep is logged and retried at the next interval.
    public func runSweeper() async {
        do {
            try removeOrphans()
        } catch {
            logger.error("the orphan sweep failed", ["error": "\(error)"])
        }
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: configuration.sweepInterval)
            } catch {
                return
            }
            do {
                try sweep()
            } catch {
                logger.error("the blob sweep failed", ["error": "\(error)"])
            }
        }
    }
}

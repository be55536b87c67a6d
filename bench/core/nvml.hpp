// The few NVML queries the timing program makes (driver version, SM clock, temperature).
// NVML is loaded at run time with dlopen, so the program runs (without clocks) where it is missing.
#pragma once

#include <optional>
#include <string>

namespace stepwise {

//! @brief A handle on one GPU through NVML, or nothing where NVML cannot be loaded.
class Nvml {
public:
    //! @brief Loads NVML and finds the GPU with this PCI bus id (as cudaDeviceGetPCIBusId writes it).
    explicit Nvml(const std::string& pci_bus_id);
    ~Nvml();
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    bool available() const { return device_ != nullptr; }
    //! Why NVML is unavailable (empty when it is available).
    const std::string& unavailable_reason() const { return reason_; }
    std::optional<std::string> driver_version() const;
    std::optional<double> sm_clock_mhz() const;
    //! The highest SM clock the GPU may run at (its boost clock), in MHz.
    std::optional<double> max_sm_clock_mhz() const;
    std::optional<double> temperature_c() const;

private:
    //! Calls an NVML `(device, enum, unsigned*)` query.
    std::optional<double> device_query(const char* function, int kind) const;

    void* library_ = nullptr;
    void* device_ = nullptr;
    std::string reason_;
};

}  // namespace stepwise

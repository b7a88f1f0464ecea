(()=>{console.log("playground");})();
